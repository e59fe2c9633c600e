package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// lapser returns lk as a driver.Lapser, or fails t.
func lapser(t *testing.T, lk dlock.Lock) driver.Lapser {
	t.Helper()
	lp, ok := lk.(driver.Lapser)
	if !ok {
		t.Fatalf("%T does not implement driver.Lapser", lk)
	}
	return lp
}

// done reports whether lk's Done is closed.
func done(lk dlock.Lock) bool {
	select {
	case <-lk.Done():
		return true
	default:
		return false
	}
}

// UnlockAfter(d) leaves the key taken on a majority until d has passed,
// even after its Locker closed, and then free: the handle ends as
// released at once.
func TestUnlockAfter(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared[:3]), newLocker(t, shared[:3])
	k := keyFor(t)
	lk, err := a.TryLock(ctx, k, dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const d = 2 * time.Second
	before := time.Now()
	if err := lapser(t, lk).UnlockAfter(ctx, d); err != nil {
		t.Fatalf("UnlockAfter: %v", err)
	}
	if !done(lk) || !errors.Is(lk.Err(), dlock.ErrNotHeld) || errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Fatalf("after UnlockAfter: Done closed %v, Err %v; want closed, ErrNotHeld", done(lk), lk.Err())
	}
	if err := lapser(t, lk).UnlockAfter(ctx, d); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("UnlockAfter twice: %v, want ErrNotHeld", err)
	}
	if err := a.Close(); err != nil { // Close does not touch a lapsing lock
		t.Fatalf("Close: %v", err)
	}
	_, err = b.TryLock(ctx, k)
	if took := time.Since(before); took >= d {
		t.Fatalf("UnlockAfter and Close took %v, longer than the lapse %v: the machine is too slow for this test", took, d)
	}
	var na *dlock.NotAcquiredError
	if !errors.As(err, &na) {
		t.Fatalf("TryLock within the lapse: %v, want ErrNotAcquired", err)
	}
	if na.RetryAfter <= 0 || na.RetryAfter > d {
		t.Errorf("RetryAfter within the lapse = %v, want in (0, %v]", na.RetryAfter, d)
	}
	var next dlock.Lock
	for end := before.Add(d + 10*time.Second); ; time.Sleep(10 * time.Millisecond) {
		next, err = b.TryLock(ctx, k)
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(end) {
			t.Fatalf("TryLock after the lapse: %v", err)
		}
	}
	// The nodes count the lapse from when they ran the PEXPIRE, after
	// before, in whole milliseconds.
	if took := time.Since(before); took < d-2*time.Millisecond {
		t.Errorf("the key was free %v after UnlockAfter(%v)", took, d)
	}
	if next.Fence() <= lk.Fence() {
		t.Errorf("fence %d after %d", next.Fence(), lk.Fence())
	}
	next.Unlock(ctx)
}

// A lapse of zero or less is Unlock: the key is free at once.
func TestUnlockAfterZeroIsUnlock(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared[:3]), newLocker(t, shared[:3])
	for _, d := range []time.Duration{0, -time.Second} {
		k := keyFor(t)
		lk, err := a.TryLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := lapser(t, lk).UnlockAfter(ctx, d); err != nil {
			t.Fatalf("UnlockAfter(%v): %v", d, err)
		}
		if !done(lk) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
			t.Errorf("UnlockAfter(%v): Done closed %v, Err %v", d, done(lk), lk.Err())
		}
		next, err := b.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("TryLock after UnlockAfter(%v): %v, want the lock at once", d, err)
		}
		next.Unlock(ctx)
	}
}

// UnlockAfter on a lock that the nodes forgot returns the loss, as
// Unlock does.
func TestUnlockAfterLost(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared[:3])
	k := keyFor(t)
	lk, err := l.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	lose(t, shared[:3], k)
	if err := lapser(t, lk).UnlockAfter(ctx, time.Second); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("UnlockAfter of a forgotten lock: %v, want ErrLockLost", err)
	}
	if !done(lk) || !errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("Done closed %v, Err %v; want the loss", done(lk), lk.Err())
	}
}

// When too few nodes answer UnlockAfter, its outcome is unknown: the
// handle stays held, the watchdog renews it no more, and it ends as
// released when the shorter lease would have run out.
func TestUnlockAfterUnknown(t *testing.T) {
	ctx := context.Background()
	s := start(t, 3)
	hook := &nodeHook{}
	cs := clients(t, s)
	for _, c := range cs {
		c.AddHook(hook)
	}
	l, err := New(cs, WithNodeTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	k := keyFor(t)
	// The handle ends at the shorter of the two leases: the lapse counts
	// from UnlockAfter, the TTL from the acquisition. A TTL 1.8s longer
	// than the lapse keeps the acquisition's lease the longer one however
	// long a loaded machine takes to pause two servers in between (with
	// 300ms, once: "the handle lapsed 916ms after UnlockAfter(1.2s)").
	const ttl, d = 3 * time.Second, 1200 * time.Millisecond
	lk, err := l.TryLock(ctx, k, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if err := s[i].Pause(); err != nil {
			t.Fatal(err)
		}
		defer s[i].Resume()
	}
	renewals := hook.calls("renew")
	before := time.Now()
	err = lapser(t, lk).UnlockAfter(ctx, d)
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("UnlockAfter with 2 of 3 nodes paused: %v, want ErrNoQuorum", err)
	}
	if done(lk) {
		t.Fatalf("UnlockAfter of unknown outcome ended the handle: %v", lk.Err())
	}
	select {
	case <-lk.Done():
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the handle did not lapse")
	}
	if took := time.Since(before); took < d-redisnode.Drift.Of(d)-2*time.Millisecond {
		t.Errorf("the handle lapsed %v after UnlockAfter(%v)", took, d)
	}
	if !errors.Is(lk.Err(), dlock.ErrNotHeld) || errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("the lapsed handle's Err: %v, want released (ErrNotHeld)", lk.Err())
	}
	if n := hook.calls("renew") - renewals; n != 0 {
		t.Errorf("the watchdog sent %d renewals after UnlockAfter", n)
	}
}

// An owner's lock lapses at d too when the lapsing hold is the owner's
// only one, as dlock.LockAll's locks are (each for an owner of its own);
// with another hold of the owner, it keeps its longer lease, which that
// hold needs. (An owner's lock kept its whole lease: UnlockAfter only
// lengthened it, so a LockAll lock lapsed a TTL later instead of at d.)
func TestUnlockAfterOwner(t *testing.T) {
	ctx := context.Background()
	a, b, c := newLocker(t, shared[:3]), newLocker(t, shared[:3]), newLocker(t, shared[:3])
	const ttl, d = time.Minute, 500 * time.Millisecond
	k := keyFor(t)
	octx := dlock.ContextWithOwner(ctx, "owner-"+k)
	lk, err := a.TryLock(octx, k, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := lapser(t, lk).UnlockAfter(ctx, d); err != nil {
		t.Fatal(err)
	}
	for end := before.Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		next, err := b.TryLock(ctx, k)
		if err == nil {
			if took := time.Since(before); took < d-2*time.Millisecond {
				t.Errorf("the key was free %v after UnlockAfter(%v)", took, d)
			}
			next.Unlock(ctx)
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(end) {
			t.Fatalf("TryLock after the lapse of an owner's only hold: %v (its lease is %v)", err, ttl)
		}
	}

	// Two holds of one owner: the lapse of one leaves the other its lease.
	k = keyFor(t)
	octx = dlock.ContextWithOwner(ctx, "owner-"+k)
	first, err := a.TryLock(octx, k, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.TryLock(octx, k, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := lapser(t, first).UnlockAfter(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d, err := second.TTL(ctx); err != nil || d < ttl/2 {
		t.Errorf("the other hold's TTL after the lapse of the first: %v, %v; want about %v", d, err, ttl)
	}
	if err := second.Unlock(octx); err != nil {
		t.Fatal(err)
	}
}
