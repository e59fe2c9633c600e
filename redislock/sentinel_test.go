package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

// Through a Sentinel failover, a lock is either kept or reported lost:
// after the new master is in place, its holder is right about it. The new
// master has no scripts cached (NOSCRIPT), which the driver handles, and
// locks are taken and released there as before.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // its own servers; it waits on failovers and leases, not on the CPU
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := redistest.StartSentinel(t, 1, 3)
	l, err := New(g.Client(t), dlock.WithTTL(time.Second), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := keyFor(t)
	lk, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	first := lk.Fence()
	if _, err := g.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Settle(ctx); err != nil { // the old master is a replica now
		t.Fatal(err)
	}
	// Two leases later the holder has renewed on the new master, or knows
	// it lost the lock.
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), dlock.ErrLockLost) {
			t.Fatalf("the hold ended with %v, want a loss", lk.Err())
		}
	case <-time.After(2 * time.Second):
		other, err := New(g.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("the holder believes it holds the lock, yet TryLock on the new master = %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock on the new master: %v", err)
		}
	}
	lk, err = l.Lock(ctx, key, dlock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Lock on the new master: %v", err)
	}
	if lk.Fence() <= first {
		t.Errorf("fence after the failover %d, before %d: not rising", lk.Fence(), first)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
