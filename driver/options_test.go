package driver_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/settings"
	"github.com/dlock-go/dlock/observe"
)

// startOf begins one wait under r, as a driver does.
func startOf(r dlock.RetryStrategy) *driver.Backoff {
	o, err := driver.NewOptions(dlock.WithRetry(r))
	if err != nil {
		panic(err)
	}
	return driver.NewBackoff(o.Retry)
}

func TestOptions(t *testing.T) {
	o, err := driver.NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != dlock.DefaultTTL || o.Prefix != dlock.DefaultPrefix || !o.AutoRenew || !o.Notify || o.Retry.Max != dlock.DefaultRetryInterval || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	c, err := o.Apply(dlock.WithLease(time.Second), dlock.WithTTL(2*time.Second), dlock.WithWait(0), dlock.WithFair(true), dlock.WithOwner("x"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TTL != 2*time.Second || c.AutoRenew || !c.Waiting || c.Wait != 0 || !c.Fair || c.Owner != "x" {
		t.Fatalf("applied: %+v", c)
	}
	if o.TTL != dlock.DefaultTTL || o.Fair {
		t.Fatal("Apply changed the Locker's options")
	}
	for name, opt := range map[string]dlock.Option{
		"ttl 0":         dlock.WithTTL(0),
		"ttl below 1ms": dlock.WithTTL(time.Microsecond),
		"negative wait": dlock.WithWait(-time.Second),
		"retry 0":       dlock.WithRetry(dlock.FixedInterval(0)),
		"retry max<min": dlock.WithRetry(dlock.ExponentialBackoff(time.Second, time.Millisecond)),
		"retry limit":   dlock.WithRetry(dlock.FixedInterval(time.Second).WithMaxAttempts(-1)),
		"prefix":        dlock.WithPrefix("p"),
		"logger":        dlock.WithLogger(nil),
		"observer":      dlock.WithObserver(observe.Func(func(context.Context, observe.Event) {})),
	} {
		if _, err := o.Apply(opt); err == nil {
			t.Errorf("%s: accepted per call", name)
		}
	}
	if _, err := driver.NewOptions(dlock.WithPrefix("")); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("empty prefix: %v", err)
	}
	if _, err := driver.NewOptions(dlock.WithObserver(nil)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("nil observer: %v", err)
	}
	if lo, err := driver.NewOptions(dlock.WithObserver(observe.Func(func(context.Context, observe.Event) {}))); err != nil || lo.Observer == nil {
		t.Errorf("an observer: %v, kept %v", err, lo.Observer != nil)
	}
	if got := o.OwnerIn(dlock.ContextWithOwner(context.Background(), "ctx-owner")); got != "ctx-owner" {
		t.Errorf("owner from ctx = %q", got)
	}
	if got := c.OwnerIn(dlock.ContextWithOwner(context.Background(), "ctx-owner")); got != "x" {
		t.Errorf("option owner should win over ctx: %q", got)
	}
}

func TestBackoff(t *testing.T) {
	b := startOf(dlock.ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond).WithMaxAttempts(6))
	var got []time.Duration
	for {
		d, ok := b.Next()
		if !ok {
			break
		}
		got = append(got, d)
	}
	if len(got) != 5 { // six attempts in all, the first made before Next
		t.Fatalf("%d delays, want 5: %v", len(got), got)
	}
	ceil := []time.Duration{10, 20, 40, 80, 80}
	for i, d := range got {
		hi := ceil[i] * time.Millisecond
		if d > hi || d < hi/2 {
			t.Errorf("delay %d = %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}
	f := startOf(dlock.FixedInterval(time.Hour).WithMaxElapsed(time.Nanosecond))
	time.Sleep(time.Millisecond) // let the elapsed limit pass
	if _, ok := f.Next(); ok {
		t.Error("Next past MaxElapsed")
	}
}

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
		if _, err := driver.NewOptions(dlock.WithRetry(r)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("%s: NewOptions = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := driver.NewOptions(dlock.WithRetry(dlock.FixedInterval(dlock.MaxRetryInterval)), dlock.WithWait(1000*time.Hour)); err != nil {
		t.Errorf("the longest retry delay and a long wait: %v", err)
	}
}

// The TTLs that leave no usable lease are refused.
func TestMinTTL(t *testing.T) {
	for _, opt := range []dlock.Option{dlock.WithTTL(2 * time.Millisecond), dlock.WithLease(dlock.MinTTL - 1)} {
		if _, err := driver.NewOptions(opt); !errors.Is(err, dlock.ErrInvalidTTL) {
			t.Errorf("NewOptions = %v, want ErrInvalidTTL", err)
		}
	}
	if _, err := driver.NewOptions(dlock.WithTTL(dlock.MinTTL)); err != nil {
		t.Errorf("WithTTL(MinTTL) = %v", err)
	}
}

// Backoff's delays and limits, on fake time.
func TestBackoffSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startOf(dlock.ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond).WithMaxElapsed(time.Second))
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

		f := startOf(dlock.FixedInterval(time.Hour).WithMaxAttempts(3))
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

func TestToken(t *testing.T) {
	if tok := driver.NewToken(); len(tok) != 22 || tok == driver.NewToken() {
		t.Fatalf("token %q", tok)
	}
}

// A driver's detached cleanup has the bound of dlock's own.
func TestReleaseTimeout(t *testing.T) {
	if driver.ReleaseTimeout != settings.ReleaseTimeout {
		t.Errorf("driver.ReleaseTimeout = %v, dlock's = %v", driver.ReleaseTimeout, settings.ReleaseTimeout)
	}
}
