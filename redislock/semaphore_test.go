package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// mustHold fails t unless an acquisition returned a hold.
func mustHold(t testing.TB) func(dlock.Lock, error) dlock.Lock {
	return func(lk dlock.Lock, err error) dlock.Lock {
		t.Helper()
		if err != nil || lk == nil {
			t.Fatalf("acquire: (%v, %v), want a hold", lk, err)
		}
		return lk
	}
}

// mustWait fails t unless an acquisition found the key busy.
func mustWait(t testing.TB) func(dlock.Lock, error) *dlock.NotAcquiredError {
	return func(lk dlock.Lock, err error) *dlock.NotAcquiredError {
		t.Helper()
		var na *dlock.NotAcquiredError
		if err == nil {
			lk.Unlock(context.Background())
			t.Fatal("acquire: got a hold, want ErrNotAcquired")
		}
		if !errors.As(err, &na) {
			t.Fatalf("acquire: %v, want a *dlock.NotAcquiredError", err)
		}
		return na
	}
}

// Permits: limit holders at once, across Lockers; a release lets the
// next one in; fences grow; RetryAfter is the first permit's lease.
func TestSemaphorePermits(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))
	k := keyFor(t)
	p1 := mustHold(t)(a.TryAcquire(ctx, k, 2, dlock.WithTTL(5*time.Second)))
	p2 := mustHold(t)(a.TryAcquire(ctx, k, 2)) // a Locker may hold several permits of a key
	if p2.Fence() <= p1.Fence() {
		t.Errorf("fences %d then %d, want growing", p1.Fence(), p2.Fence())
	}
	na := mustWait(t)(b.TryAcquire(ctx, k, 2))
	if na.RetryAfter <= 0 || na.RetryAfter > 10*time.Second {
		t.Errorf("RetryAfter = %v, want the first permit's lease, in (0, 10s]", na.RetryAfter)
	}
	if d, err := p1.TTL(ctx); err != nil || d <= 0 || d > 5*time.Second {
		t.Errorf("TTL = %v, %v; want in (0, 5s]", d, err)
	}
	if err := p1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	p3 := mustHold(t)(b.TryAcquire(ctx, k, 2))
	if p3.Fence() <= p2.Fence() {
		t.Errorf("fence %d after %d, want growing", p3.Fence(), p2.Fence())
	}
	if err := p1.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := a.Release(ctx, k); err != nil { // p2: a's most recent permit
		t.Fatalf("Release: %v", err)
	}
	if p2.Err() == nil {
		t.Error("Release did not end the permit it gave back")
	}
	if err := a.Release(ctx, k); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release with no permit: %v, want ErrNotHeld", err)
	}
	if err := p3.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// A release wakes a waiter at once: the waiter's fallback sleep is a
// minute, so only the wake-up can bring it the permit within the bound.
func TestSemaphoreWake(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	held := mustHold(t)(a.TryAcquire(ctx, k, 1))
	got := make(chan error, 1)
	go func() {
		lk, err := b.Acquire(ctx, k, 1, dlock.WithWait(20*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	dlocktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
		info, err := a.InspectKind(ctx, dlock.KindSemaphore, k)
		return err == nil && info.Waiters == 1
	})
	start := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := within(t, got, 10*time.Second, "the woken waiter"); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the waiter took %v after the release: it slept instead of being woken", el)
	}
}

// A holder that stops renewing (its Locker orphaned, as a crashed process
// leaves it) gives its permit back when its lease runs out, and the waiter
// gets it; the orphan's handle reports the loss.
func TestSemaphoreExpiry(t *testing.T) {
	ctx := context.Background()
	dead, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	lk := mustHold(t)(dead.TryAcquire(ctx, k, 1, dlock.WithTTL(300*time.Millisecond)))
	mustWait(t)(b.TryAcquire(ctx, k, 1))
	if err := dead.Orphan(); err != nil {
		t.Fatalf("Orphan: %v", err)
	}
	if !errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("orphaned permit: Err = %v, want ErrLockLost", lk.Err())
	}
	start := time.Now()
	got := mustHold(t)(b.Acquire(ctx, k, 1, dlock.WithWait(10*time.Second)))
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the permit came back after %v, want about its 300ms lease", el)
	}
	if err := got.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// Changing the limit at run time: the latest acquisition's limit is the
// semaphore's; holders above a lowered limit keep their permits until they
// release them, and nobody comes in until the holders are fewer than the
// new limit; a raised limit admits the queue first, at once.
func TestSemaphoreLimitChange(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	var holds []dlock.Lock
	for range 3 {
		holds = append(holds, mustHold(t)(a.TryAcquire(ctx, k, 3)))
	}
	mustWait(t)(b.TryAcquire(ctx, k, 1)) // lowers the limit to 1
	info, err := a.InspectKind(ctx, dlock.KindSemaphore, k)
	if err != nil || info.Limit != 1 || info.Holds != 3 {
		t.Fatalf("after lowering: %+v, %v; want limit 1 and the 3 holds kept", info, err)
	}
	for i, lk := range holds {
		if lk.Err() != nil {
			t.Fatalf("hold %d lost when the limit was lowered: %v", i, lk.Err())
		}
	}
	holds[0].Unlock(ctx)
	holds[1].Unlock(ctx)
	mustWait(t)(b.TryAcquire(ctx, k, 1)) // one holder left: not fewer than 1
	holds[2].Unlock(ctx)
	one := mustHold(t)(b.TryAcquire(ctx, k, 1))

	// Raise it: a waiter at limit 1 is admitted by the acquisition that
	// raises the limit to 2, before that acquisition itself.
	waited := make(chan dlock.Lock, 1)
	go func() {
		lk, err := a.Acquire(ctx, k, 1, dlock.WithWait(20*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		waited <- lk
	}()
	dlocktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
		info, err := a.InspectKind(ctx, dlock.KindSemaphore, k)
		return err == nil && info.Waiters == 1
	})
	mustWait(t)(b.TryAcquire(ctx, k, 2)) // the new room went to the waiter
	w := within(t, waited, 10*time.Second, "the waiter, after the limit was raised")
	three := mustHold(t)(b.TryAcquire(ctx, k, 3))
	for _, lk := range []dlock.Lock{one, w, three} {
		if lk == nil {
			continue
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	}
}

// Bad input changes nothing and says why.
func TestSemaphoreBadInput(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, shared)
	k := keyFor(t)
	for _, limit := range []int{0, -1, dlock.MaxLimit + 1} {
		if _, err := a.TryAcquire(ctx, k, limit); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("limit %d: %v, want ErrInvalidOption", limit, err)
		}
		if _, err := a.Acquire(ctx, k, limit); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("Acquire, limit %d: %v, want ErrInvalidOption", limit, err)
		}
	}
	if _, err := a.TryAcquire(ctx, "", 1); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("empty key: %v, want ErrInvalidKey", err)
	}
	if _, err := a.TryAcquire(ctx, k, 1, dlock.WithTTL(time.Microsecond)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("bad TTL: %v, want ErrInvalidTTL", err)
	}
	if _, err := a.TryAcquire(ctx, k, 1, WithReplicaAck(1, time.Hour)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("WithReplicaAck beyond the client's ReadTimeout: %v, want ErrInvalidOption", err)
	}
	info, err := a.InspectKind(ctx, dlock.KindSemaphore, k)
	if err != nil || info.Held || info.Limit != 0 {
		t.Errorf("after bad input: %+v, %v; want nothing written", info, err)
	}
}

// Permits(locker, n) is a Locker: dlock.Do runs under a permit, and its
// context ends when the permit is lost.
func TestSemaphoreDo(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, shared)
	c := shared.Client(t)
	k := keyFor(t)
	err := dlock.Do(ctx, dlock.Permits(a, 2), k, func(fctx context.Context) error {
		lk, ok := dlock.LockFrom(fctx)
		if !ok {
			return errors.New("no lock in fn's context")
		}
		// Someone deletes the semaphore: the watchdog finds the permit gone.
		if err := c.Del(ctx, "dlock:sem:"+k).Err(); err != nil {
			return err
		}
		lk.Refresh(fctx, time.Second) // as a renewal would
		select {
		case <-fctx.Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("fn's context still open after the permit was lost")
		}
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Do: %v, want ErrLockLost", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.TryAcquire(ctx, k, 1); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
