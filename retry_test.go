package dlock_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
)

// Retry delays are bounded: a delay long enough to overflow the arithmetic
// of a driver (a waiter's claim window is twice the delay) is refused.
func TestRetryBounds(t *testing.T) {
	for name, r := range map[string]dlock.RetryStrategy{
		"fixed 200 years":        dlock.FixedInterval(200 * 365 * 24 * time.Hour),
		"exponential to 1000h":   dlock.ExponentialBackoff(time.Millisecond, 1000*time.Hour),
		"fixed over the limit":   dlock.FixedInterval(dlock.MaxRetryInterval + time.Nanosecond),
		"a negative max":         dlock.ExponentialBackoff(time.Millisecond, -time.Second),
		"a zero initial delay":   dlock.FixedInterval(0),
		"attempts below zero":    dlock.FixedInterval(time.Second).WithMaxAttempts(-1),
		"max elapsed below zero": dlock.FixedInterval(time.Second).WithMaxElapsed(-1),
	} {
		if _, err := dlock.NewOptions(dlock.WithRetry(r)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("%s: NewOptions = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := dlock.NewOptions(dlock.WithRetry(dlock.FixedInterval(dlock.MaxRetryInterval)), dlock.WithWait(1000*time.Hour)); err != nil {
		t.Errorf("the longest retry delay and a long wait: %v", err)
	}
}

// The TTLs that leave no usable lease are refused.
func TestMinTTL(t *testing.T) {
	for _, opt := range []dlock.Option{dlock.WithTTL(2 * time.Millisecond), dlock.WithLease(dlock.MinTTL - 1)} {
		if _, err := dlock.NewOptions(opt); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("NewOptions = %v, want ErrInvalidTTL", err)
		}
	}
	if _, err := dlock.NewOptions(dlock.WithTTL(dlock.MinTTL)); err != nil {
		t.Errorf("WithTTL(MinTTL) = %v", err)
	}
}

// Backoff's delays and limits, on fake time.
func TestBackoffSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := dlock.ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond).WithMaxElapsed(time.Second).Start()
		start := time.Now()
		ceil := 10 * time.Millisecond
		for {
			d, ok := b.Next()
			if !ok {
				break
			}
			hi := max(min(ceil, time.Second-time.Since(start)), time.Microsecond) // the elapsed limit cuts the last delay; 1µs at least
			if d <= 0 || d > hi || d < hi/2 {
				t.Fatalf("delay %v outside [%v, %v]", d, hi/2, hi)
			}
			time.Sleep(d)
			ceil = min(2*ceil, 80*time.Millisecond)
		}
		if e := time.Since(start); e < time.Second || e > time.Second+time.Microsecond {
			t.Fatalf("stopped after %v of fake time, want the 1s limit (plus the 1µs floor of a delay)", e)
		}

		f := dlock.FixedInterval(time.Hour).WithMaxAttempts(3).Start()
		for i := range 2 {
			if d, ok := f.Next(); !ok || d != time.Hour {
				t.Fatalf("attempt %d: %v, %v", i+2, d, ok)
			}
		}
		if _, ok := f.Next(); ok {
			t.Fatal("a fourth attempt after WithMaxAttempts(3)")
		}
	})
}
