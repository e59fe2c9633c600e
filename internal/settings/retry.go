package settings

import (
	"math/rand/v2"
	"time"
)

// Retry is a retry strategy: the delay before attempt n+1 (n counting
// from 0) is min(Max, Initial*Factor^n), less a random fraction of at most
// Jitter of it.
type Retry struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       float64
	MaxAttempts  int           // 0: no limit
	MaxElapsed   time.Duration // 0: no limit
}

// Start begins one wait. The first attempt counts as made.
func (r Retry) Start() *Backoff {
	return &Backoff{r: r, start: time.Now(), next: r.Initial, attempts: 1}
}

// Backoff is the state of one wait under a Retry. It is not safe for
// concurrent use.
type Backoff struct {
	r        Retry
	start    time.Time
	next     time.Duration
	attempts int
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
