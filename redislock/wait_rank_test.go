package redislock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Waiters far from the head of the queue come back less often than the
// head: the attempts a queue makes while the lock stays held do not grow
// with every waiter at the pace of its retry interval.
func TestFarWaitersAttemptLess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := keyFor(t)
	holder := newLocker(t, shared, dlock.WithTTL(time.Minute))
	lk, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	hook := &counter{}
	c := shared.Client(t)
	c.AddHook(hook)
	const n, delay, window = 24, 50 * time.Millisecond, time.Second
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range n {
		w := lockerOf(t, c) // a party of its own, on the counted client
		wg.Go(func() { w.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(delay))) })
	}
	queued(t, shared, key, n)
	before := hook.trips.Load()
	time.Sleep(window) // the window the attempts are counted in
	got := hook.trips.Load() - before
	// At the pace of the retry interval, the queue would make n*window/delay
	// attempts (480); the waiters behind the first two sleep longer, up to 8
	// times their delay.
	if limit := int64(n) * int64(window/delay) / 3; got > limit {
		t.Fatalf("%d waiters made %d round trips in %v with a retry interval of %v, want at most %d", n, got, window, delay, limit)
	}
}

// A release skips a queued waiter whose Locker no longer listens (its
// process is gone) and hands the lock to the next one at once, rather than
// leaving it to the gone waiter for that waiter's claim window.
func TestGrantSkipsGoneWaiter(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	holder := newLocker(t, shared)
	lk, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The gone waiter queued with a claim window of a minute, on behalf of
	// a Locker that never subscribed.
	gone := newLocker(t, shared)
	dead := gone.newLock(driver.HoldLock, key, lk.(*hold).keys, "gone-waiter", "", false, 10*time.Second)
	if _, _, err := gone.attempt(ctx, dead, modeWait, time.Minute, 1, nil); err != nil {
		t.Fatal(err)
	}
	waiter := newLocker(t, shared)
	got := waitFor(ctx, waiter, key, dlock.WithRetry(dlock.FixedInterval(10*time.Second)))
	queued(t, shared, key, 2)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := acquiredWithin(t, got, 5*time.Second, "the waiter behind a gone one")
	next.Unlock(ctx)
}

// A fair waiter that polls (WithNotify(false)) has no Locker listening
// for it, and is granted the lock in its turn all the same.
func TestGrantToPollingWaiter(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	holder := newLocker(t, shared)
	lk, err := holder.TryLock(ctx, key, dlock.WithFair(true))
	if err != nil {
		t.Fatal(err)
	}
	poller := newLocker(t, shared)
	got := waitFor(ctx, poller, key, dlock.WithFair(true), dlock.WithNotify(false), dlock.WithRetry(dlock.FixedInterval(100*time.Millisecond)))
	queued(t, shared, key, 1)
	// A subscribed waiter behind it.
	second := newLocker(t, shared)
	after := waitFor(ctx, second, key, dlock.WithFair(true), dlock.WithRetry(dlock.FixedInterval(100*time.Millisecond)))
	queued(t, shared, key, 2)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := acquiredWithin(t, got, 5*time.Second, "the polling waiter at the head")
	select {
	case l := <-after:
		t.Fatalf("the second waiter got the lock (%v) while the first held it", l)
	default:
	}
	first.Unlock(ctx)
	acquiredWithin(t, after, 5*time.Second, "the second waiter").Unlock(ctx)
}
