package dlock

import (
	"fmt"
	"time"
)

// RetryStrategy paces the attempts of a waiting Lock. It is a value: copies
// share nothing, and one strategy can serve any number of concurrent
// calls; [WithRetry] refuses one out of range.
//
// The delay before attempt n+1 (n counting from 0) is
//
//	min(Max, Initial * Factor^n), then reduced by a random fraction of at
//	most Jitter (so it lies in [d*(1-Jitter), d])
//
// [FixedInterval] has Factor 1 and no jitter; [ExponentialBackoff] has
// Factor 2 and Jitter 0.5.
type RetryStrategy struct {
	// Initial is the first delay, and Max the longest: 0 < Initial <= Max
	// <= MaxRetryInterval.
	Initial, Max time.Duration
	// Factor multiplies the delay after each attempt: at least 1.
	Factor float64
	// Jitter is the largest fraction of a delay taken off at random, in
	// [0, 1).
	Jitter float64
	// MaxAttempts stops waiting after that many attempts in all (the first
	// included); 0 for no limit.
	MaxAttempts int
	// MaxElapsed stops waiting once that long has passed since the first
	// attempt; 0 for no limit.
	MaxElapsed time.Duration
}

// FixedInterval waits d between attempts.
func FixedInterval(d time.Duration) RetryStrategy {
	return RetryStrategy{Initial: d, Max: d, Factor: 1}
}

// ExponentialBackoff starts at initial and doubles each attempt up to max,
// with up to 50% jitter so that waiters spread out.
func ExponentialBackoff(initial, max time.Duration) RetryStrategy {
	return RetryStrategy{Initial: initial, Max: max, Factor: 2, Jitter: 0.5}
}

// WithMaxAttempts stops waiting after n attempts in all (the first included).
// Zero means no limit.
func (r RetryStrategy) WithMaxAttempts(n int) RetryStrategy {
	r.MaxAttempts = n
	return r
}

// WithMaxElapsed stops waiting once d has passed since the first attempt.
// Zero means no limit.
func (r RetryStrategy) WithMaxElapsed(d time.Duration) RetryStrategy {
	r.MaxElapsed = d
	return r
}

// Interval is the longest delay the strategy ever waits between attempts:
// Max.
func (r RetryStrategy) Interval() time.Duration { return r.Max }

func (r RetryStrategy) validate() error {
	switch {
	case r.Initial <= 0 || r.Max < r.Initial:
		return fmt.Errorf("%w: retry delays must satisfy 0 < initial <= max, got %v and %v", ErrInvalidOption, r.Initial, r.Max)
	case r.Max > MaxRetryInterval:
		return fmt.Errorf("%w: retry delay %v over the limit of %v", ErrInvalidOption, r.Max, MaxRetryInterval)
	case r.Factor < 1:
		return fmt.Errorf("%w: retry factor %v below 1", ErrInvalidOption, r.Factor)
	case r.Jitter < 0 || r.Jitter >= 1:
		return fmt.Errorf("%w: retry jitter %v outside [0, 1)", ErrInvalidOption, r.Jitter)
	case r.MaxAttempts < 0 || r.MaxElapsed < 0:
		return fmt.Errorf("%w: negative retry limit", ErrInvalidOption)
	}
	return nil
}
