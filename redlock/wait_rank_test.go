package redlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// queuedOn waits until n waiters queue for key on a majority of the
// servers (what orders them; a node whose reply was late may miss one).
func queuedOn(t testing.TB, key string, n int64) {
	t.Helper()
	cs := clients(t, shared)
	// Each waiter's Locker subscribes and queues on every node first: for
	// 48 waiters, a loaded machine once took more than 10s.
	dlocktest.Eventually(t, 30*time.Second, fmt.Sprintf("%d waiters queued on a majority", n), func() bool {
		full := 0
		for _, c := range cs {
			if c.ZCard(context.Background(), "{dlock:lock:"+key+"}:q").Val() == n {
				full++
			}
		}
		return full > len(cs)/2
	})
}

// Waiters far from the head of the queues come back less often than the
// head: the attempts a queue makes while the lock stays held do not grow
// with every waiter at the pace of its fallback.
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
	hook := &nodeHook{}
	cs := clients(t, shared)
	for _, c := range cs {
		c.(*redis.Client).AddHook(hook)
	}
	const n, delay, window = 48, 50 * time.Millisecond, 2 * time.Second
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range n {
		w, err := New(cs, WithNodeTimeout(testTimeout), dlock.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		wg.Go(func() { w.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(delay))) })
	}
	queuedOn(t, key, n)
	before := hook.trips.Load()
	time.Sleep(window) // the window the attempts are counted in
	got := hook.trips.Load() - before
	// With each waiter's fallback doubling up to 8 times its delay, the
	// queue would make about n*window/(8*delay) attempts of 5 round trips
	// (1200); the waiters further back than the eighth sleep longer.
	if limit := int64(len(cs)) * int64(n) * int64(window/(8*delay)) / 2; got > limit {
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
	// The gone waiter queued first, with a claim window of a minute, on
	// behalf of a Locker that never subscribed.
	gone := newLocker(t, shared)
	dead, _, err := gone.prepare(ctx, key, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // its Lock call ends, as Lock ends one that failed
		gone.tables.Locks.Remove(dead)
		gone.tables.Locks.Leave()
	}()
	if res := gone.attempt(ctx, dead, &queueing{score: time.Now().UnixMicro(), claim: time.Minute, attempt: 1}); !res.busy {
		t.Fatalf("the gone waiter's attempt: %v", res.err)
	}
	type result struct {
		lk  dlock.Lock
		err error
	}
	got := make(chan result, 1)
	waiter := newLocker(t, shared)
	go func() {
		next, err := waiter.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(10*time.Second)))
		got <- result{next, err}
	}()
	queuedOn(t, key, 2)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.lk.Unlock(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind a gone one: no lock after 5s")
	}
}
