package dlock

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock/internal/settings"
)

// RetryStrategy paces the attempts of a waiting Lock. It is a value: copies
// share nothing, and one strategy can serve any number of concurrent
// calls.
//
// The delay before attempt n+1 (n counting from 0) is
//
//	min(max, initial * factor^n), then reduced by a random fraction of at
//	most jitter (so it lies in [d*(1-jitter), d])
//
// FixedInterval has factor 1 and no jitter; ExponentialBackoff has factor 2
// and jitter 0.5.
type RetryStrategy struct{ r settings.Retry }

// FixedInterval waits d between attempts.
func FixedInterval(d time.Duration) RetryStrategy {
	return RetryStrategy{settings.Retry{Initial: d, Max: d, Factor: 1}}
}

// ExponentialBackoff starts at initial and doubles each attempt up to max,
// with up to 50% jitter so that waiters spread out.
func ExponentialBackoff(initial, max time.Duration) RetryStrategy {
	return RetryStrategy{settings.Retry{Initial: initial, Max: max, Factor: 2, Jitter: 0.5}}
}

// WithMaxAttempts stops waiting after n attempts in all (the first included).
// Zero means no limit.
func (r RetryStrategy) WithMaxAttempts(n int) RetryStrategy {
	r.r.MaxAttempts = n
	return r
}

// WithMaxElapsed stops waiting once d has passed since the first attempt.
// Zero means no limit.
func (r RetryStrategy) WithMaxElapsed(d time.Duration) RetryStrategy {
	r.r.MaxElapsed = d
	return r
}

// Interval is the longest delay the strategy ever waits between attempts.
func (r RetryStrategy) Interval() time.Duration { return r.r.Max }

func (r RetryStrategy) validate() error {
	b := r.r
	switch {
	case b.Initial <= 0 || b.Max < b.Initial:
		return fmt.Errorf("%w: retry delays must satisfy 0 < initial <= max, got %v and %v", ErrInvalidOption, b.Initial, b.Max)
	case b.Max > MaxRetryInterval:
		return fmt.Errorf("%w: retry delay %v over the limit of %v", ErrInvalidOption, b.Max, MaxRetryInterval)
	case b.Factor < 1:
		return fmt.Errorf("%w: retry factor %v below 1", ErrInvalidOption, b.Factor)
	case b.Jitter < 0 || b.Jitter >= 1:
		return fmt.Errorf("%w: retry jitter %v outside [0, 1)", ErrInvalidOption, b.Jitter)
	case b.MaxAttempts < 0 || b.MaxElapsed < 0:
		return fmt.Errorf("%w: negative retry limit", ErrInvalidOption)
	}
	return nil
}
