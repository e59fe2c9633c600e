package driver

import (
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock"
)

// Backoff is the state of one wait under a [dlock.RetryStrategy]: the
// delays between the attempts of one waiting Lock. It is not safe for
// concurrent use.
type Backoff struct {
	r        dlock.RetryStrategy
	start    time.Time
	next     time.Duration
	attempts int
}

// NewBackoff begins one wait under r, now. The first attempt counts as
// made.
func NewBackoff(r dlock.RetryStrategy) *Backoff {
	return &Backoff{r: r, start: time.Now(), next: r.Initial, attempts: 1}
}

// Next returns the delay before the next attempt, and false when the
// strategy's attempt or elapsed-time limit says to stop.
func (b *Backoff) Next() (time.Duration, bool) {
	if b.r.MaxAttempts > 0 && b.attempts >= b.r.MaxAttempts {
		return 0, false
	}
	d := b.next
	if b.r.MaxElapsed > 0 {
		left := b.r.MaxElapsed - time.Since(b.start)
		if left <= 0 {
			return 0, false
		}
		d = min(d, left)
	}
	b.attempts++
	b.next = min(b.r.Max, time.Duration(float64(b.next)*b.r.Factor))
	if b.r.Jitter > 0 {
		d -= time.Duration(rand.Float64() * b.r.Jitter * float64(d))
	}
	return max(d, time.Microsecond), true
}
