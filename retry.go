package dlock

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryStrategy paces the attempts of a waiting Lock. It is a value: copies
// share nothing, and the counters of one wait live in the Backoff that Start
// returns, so one strategy can serve any number of concurrent calls.
//
// The delay before attempt n+1 (n counting from 0) is
//
//	min(max, initial * factor^n), then reduced by a random fraction of at
//	most jitter (so it lies in [d*(1-jitter), d])
//
// FixedInterval has factor 1 and no jitter; ExponentialBackoff has factor 2
// and jitter 0.5.
type RetryStrategy struct {
	initial, max time.Duration
	factor       float64
	jitter       float64
	maxAttempts  int
	maxElapsed   time.Duration
}

// MaxRetryInterval is the longest delay between two attempts that a
// RetryStrategy may ask for. A waiter that sleeps longer keeps its place in
// a queue for twice its delay, so a longer delay would hold up the waiters
// behind a crashed one for hours; to wait that long, bound the wait with
// WithWait or the context instead.
const MaxRetryInterval = time.Hour

// FixedInterval waits d between attempts.
func FixedInterval(d time.Duration) RetryStrategy {
	return RetryStrategy{initial: d, max: d, factor: 1}
}

// ExponentialBackoff starts at initial and doubles each attempt up to max,
// with up to 50% jitter so that waiters spread out.
func ExponentialBackoff(initial, max time.Duration) RetryStrategy {
	return RetryStrategy{initial: initial, max: max, factor: 2, jitter: 0.5}
}

// WithMaxAttempts stops waiting after n attempts in all (the first included).
// Zero means no limit.
func (r RetryStrategy) WithMaxAttempts(n int) RetryStrategy {
	r.maxAttempts = n
	return r
}

// WithMaxElapsed stops waiting once d has passed since the first attempt.
// Zero means no limit.
func (r RetryStrategy) WithMaxElapsed(d time.Duration) RetryStrategy {
	r.maxElapsed = d
	return r
}

// Interval is the longest delay the strategy ever waits between attempts.
func (r RetryStrategy) Interval() time.Duration { return r.max }

func (r RetryStrategy) validate() error {
	switch {
	case r.initial <= 0 || r.max < r.initial:
		return fmt.Errorf("%w: retry delays must satisfy 0 < initial <= max, got %v and %v", ErrInvalidOption, r.initial, r.max)
	case r.max > MaxRetryInterval:
		return fmt.Errorf("%w: retry delay %v over the limit of %v", ErrInvalidOption, r.max, MaxRetryInterval)
	case r.factor < 1:
		return fmt.Errorf("%w: retry factor %v below 1", ErrInvalidOption, r.factor)
	case r.jitter < 0 || r.jitter >= 1:
		return fmt.Errorf("%w: retry jitter %v outside [0, 1)", ErrInvalidOption, r.jitter)
	case r.maxAttempts < 0 || r.maxElapsed < 0:
		return fmt.Errorf("%w: negative retry limit", ErrInvalidOption)
	}
	return nil
}

// Start begins one wait. The first attempt counts as made.
func (r RetryStrategy) Start() *Backoff {
	return &Backoff{r: r, start: time.Now(), next: r.initial, attempts: 1}
}

// Backoff is the state of one wait under a RetryStrategy. It is not safe for
// concurrent use.
type Backoff struct {
	r        RetryStrategy
	start    time.Time
	next     time.Duration
	attempts int
}

// Next returns the delay before the next attempt, and false when the
// strategy's attempt or elapsed-time limit says to stop.
func (b *Backoff) Next() (time.Duration, bool) {
	if b.r.maxAttempts > 0 && b.attempts >= b.r.maxAttempts {
		return 0, false
	}
	d := b.next
	if b.r.maxElapsed > 0 {
		left := b.r.maxElapsed - time.Since(b.start)
		if left <= 0 {
			return 0, false
		}
		d = min(d, left)
	}
	b.attempts++
	b.next = min(b.r.max, time.Duration(float64(b.next)*b.r.factor))
	if b.r.jitter > 0 {
		d -= time.Duration(rand.Float64() * b.r.jitter * float64(d))
	}
	return max(d, time.Microsecond), true
}
