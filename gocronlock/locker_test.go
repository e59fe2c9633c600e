package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/gocronlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redislock"
)

// A scheduler that dies in the middle of a run, its Locker cut from the
// server so that it can neither renew nor release (gocron never calls
// Unlock), leaves the job's key taken for the hold from the run's start,
// not one TTL after its last renewal: another scheduler whose clock fires
// the same tick 2s later skips it, and one after the hold runs.
func TestLockerHoldsAfterDeathMidRun(t *testing.T) {
	ctx := context.Background()
	const ttl, hold = time.Second, 4 * time.Second
	proxy := redistest.StartProxy(t, server)
	cut, err := redislock.New(proxy.Client(t), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cut.Close() })
	dying, err := gocronlock.NewLocker(cut, hold)
	if err != nil {
		t.Fatal(err)
	}
	other, err := gocronlock.NewLocker(locker(t), hold)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("dies-%d", time.Now().UnixNano())

	start := time.Now()
	if _, err := dying.Lock(ctx, key); err != nil {
		t.Fatal(err)
	}
	proxy.Cut() // the scheduler is gone in the middle of its run

	for _, at := range []time.Duration{2 * time.Second, hold - 500*time.Millisecond} {
		time.Sleep(time.Until(start.Add(at))) // another scheduler's clock, later
		lk, err := other.Lock(ctx, key)
		if time.Since(start) >= hold {
			continue // too late to tell: this machine stalled past the hold
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			if lk != nil {
				lk.Unlock(ctx)
			}
			t.Fatalf("Lock on another scheduler %v after the run began, within the hold: %v; want ErrNotAcquired",
				time.Since(start).Round(time.Millisecond), err)
		}
	}

	time.Sleep(time.Until(start.Add(hold + 500*time.Millisecond)))
	lk, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock on another scheduler after the hold: %v, want the lock", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
