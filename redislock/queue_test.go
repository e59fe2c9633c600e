package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// A malformed or missing waiter entry (written by an older version, or by
// hand) counts as a dead waiter: attempts and grants go on without a
// script error, and the entry is dropped.
func TestMalformedWaiterEntry(t *testing.T) {
	ctx := context.Background()
	raw := shared.Client(t)
	l := newLocker(t, shared)
	key := keyFor(t)
	queue, waiters := "{dlock:lock:"+key+"}:q", "{dlock:lock:"+key+"}:w"
	for _, entry := range []string{"garbage", "|||", ""} {
		raw.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "ghost"}, redis.Z{Score: 2, Member: "missing"})
		raw.HSet(ctx, waiters, "ghost", entry)
		raw.Expire(ctx, queue, time.Minute)
		raw.Expire(ctx, waiters, time.Minute)
		lk, err := l.TryLock(ctx, key, dlock.WithFair(true))
		if err != nil {
			t.Fatalf("fair TryLock past a waiter entry %q: %v", entry, err)
		}
		if n := raw.ZCard(ctx, queue).Val(); n != 0 {
			t.Fatalf("entry %q: %d dead waiters left in the queue", entry, n)
		}
		raw.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "ghost"})
		raw.HSet(ctx, waiters, "ghost", entry)
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock granting past a waiter entry %q: %v", entry, err)
		}
		if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
			t.Fatalf("entry %q: the lock was granted to a dead waiter", entry)
		}
	}
	if _, err := l.TryLock(ctx, key, dlock.WithFair(true)); errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal("the key stays busy")
	}
}
