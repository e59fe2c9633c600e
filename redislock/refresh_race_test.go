package redislock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// A Refresh that shortens the lease while a renewal of the old TTL is on
// the wire (its reply held at a gate until the Refresh returned) keeps the
// lock: nobody else holds it, so once the renewal's reply lands the
// watchdog renews at the new TTL's cadence, and the hold stays held.
func TestShorterRefreshDuringRenewalKeepsLock(t *testing.T) {
	ctx := context.Background()
	held := make(chan struct{}) // the first renewal ran, its reply waits
	gate := make(chan struct{})
	var once sync.Once
	var renewals atomic.Int64 // replies handed back to the watchdog
	l := lockerWith(t, scriptHook{
		match: func(cmd redis.Cmder) bool { return renews(cmd) },
		do: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			err := next(ctx, cmd)
			once.Do(func() {
				close(held)
				<-gate
			})
			renewals.Add(1)
			return err
		},
	})
	// short leaves a loaded machine room: a renewal must come back within
	// two thirds of it (a 1s lease, renewed with 667ms to spare, was lost
	// once under make test's load)
	const ttl, short = 6 * time.Second, 2 * time.Second
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	within(t, held, 5*time.Second, "the first renewal")
	if err := lk.Refresh(ctx, short); err != nil {
		t.Fatal(err)
	}
	close(gate)
	// ten renewals after the one held: more than three short leases
	deadline := time.After(60 * time.Second)
	for renewals.Load() < 11 {
		select {
		case <-lk.Done():
			t.Fatalf("after %d renewals: %v; want the lock kept", renewals.Load(), lk.Err())
		case <-deadline:
			t.Fatalf("%d renewals in 60s, want 11", renewals.Load())
		case <-time.After(5 * time.Millisecond): // poll interval, bounded by deadline
		}
	}
	if err := lk.Err(); err != nil {
		t.Fatalf("Err = %v, want the lock kept", err)
	}
	if pttl := shared.Client(t).PTTL(ctx, "dlock:lock:"+key).Val(); pttl <= 0 || pttl > short {
		t.Errorf("PTTL %v, want the refreshed lease, in (0, %v]", pttl, short)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
