package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	o, err := NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != DefaultTTL || o.Prefix != DefaultPrefix || !o.AutoRenew || !o.Notify || o.Retry.Interval() != DefaultRetryInterval || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	c, err := o.Apply(WithLease(time.Second), WithTTL(2*time.Second), WithWait(0), WithFair(true), WithOwnerID("x"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TTL != 2*time.Second || c.AutoRenew || !c.Waiting || c.Wait != 0 || !c.Fair || c.Owner != "x" {
		t.Fatalf("applied: %+v", c)
	}
	if o.TTL != DefaultTTL || o.Fair {
		t.Fatal("Apply changed the Locker's options")
	}
	for name, opt := range map[string]Option{
		"ttl 0":         WithTTL(0),
		"ttl below 1ms": WithTTL(time.Microsecond),
		"negative wait": WithWait(-time.Second),
		"retry 0":       WithRetry(FixedInterval(0)),
		"retry max<min": WithRetry(ExponentialBackoff(time.Second, time.Millisecond)),
		"retry limit":   WithRetry(FixedInterval(time.Second).WithMaxAttempts(-1)),
		"prefix":        WithPrefix("p"),
		"logger":        WithLogger(nil),
	} {
		if _, err := o.Apply(opt); err == nil {
			t.Errorf("%s: accepted per call", name)
		}
	}
	if _, err := NewOptions(WithPrefix("")); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("empty prefix: %v", err)
	}
	if got := o.OwnerIn(WithOwner(context.Background(), "ctx-owner")); got != "ctx-owner" {
		t.Errorf("owner from ctx = %q", got)
	}
	if got := c.OwnerIn(WithOwner(context.Background(), "ctx-owner")); got != "x" {
		t.Errorf("option owner should win over ctx: %q", got)
	}
}

func TestBackoff(t *testing.T) {
	b := ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond).WithMaxAttempts(6).Start()
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
	f := FixedInterval(time.Hour).WithMaxElapsed(time.Nanosecond).Start()
	time.Sleep(time.Millisecond) // let the elapsed limit pass
	if _, ok := f.Next(); ok {
		t.Error("Next past MaxElapsed")
	}
}

func TestErrors(t *testing.T) {
	err := error(&NotAcquiredError{Key: "k", RetryAfter: time.Second, Err: context.DeadlineExceeded})
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not match both", err)
	}
	lost := error(&LostError{Key: "k", Err: ErrOwnershipLost})
	if !errors.Is(lost, ErrLockLost) || !errors.Is(lost, ErrNotHeld) || !errors.Is(lost, ErrOwnershipLost) {
		t.Fatalf("%v does not match", lost)
	}
	if got := (&KeyError{Key: "order:1", Err: ErrNotHeld}).Error(); got != `dlock: "order:1": not held` {
		t.Fatalf("KeyError = %q", got)
	}
	var ke *KeyError
	err = fmt.Errorf("wrapped: %w", &KeyError{Op: "unlock", Key: strings.Repeat("k", 100), Err: ErrNotHeld})
	if !errors.As(err, &ke) || ke.Op != "unlock" || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("errors.As/Is through a *KeyError: %v", err)
	}
	if got := ke.Error(); got != `dlock: unlock "`+strings.Repeat("k", 40)+"…"+strings.Repeat("k", 16)+`": not held` {
		t.Fatalf("a long key in a message: %q", got)
	}
	if tok := NewToken(); len(tok) != 22 || tok == NewToken() {
		t.Fatalf("token %q", tok)
	}
}

func TestConfig(t *testing.T) {
	o, err := NewOptions(Config{}.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	if o.Prefix != DefaultPrefix || o.TTL != DefaultTTL || o.Retry.Interval() != DefaultRetryInterval {
		t.Fatalf("zero Config: prefix %q ttl %v retry %v, want the defaults", o.Prefix, o.TTL, o.Retry.Interval())
	}
	o, err = NewOptions(Config{Prefix: "neton", DefaultTTL: 30 * time.Second, RetryInterval: 50 * time.Millisecond}.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	if o.Prefix != "neton" || o.TTL != 30*time.Second || o.Retry.Interval() != 50*time.Millisecond {
		t.Fatalf("Config: %+v", o)
	}
	for _, c := range []Config{{DefaultTTL: -time.Second}, {RetryInterval: -time.Millisecond}, {DefaultTTL: time.Microsecond}} {
		if _, err := NewOptions(c.Options()...); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
