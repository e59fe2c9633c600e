package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A batch of plain locks of one server larger than one script call goes as
// one pipeline of calls of maxPipeline locks: one round trip, the first
// one loading the script. A call that finds the script flushed is sent
// again; a lock no longer ours is lost
// alone; a chunk with an owner's lock goes its own way, and every lock is
// renewed, its outcome in its place.
func TestRenewPlainChunksInOnePipeline(t *testing.T) {
	s := redistest.Start(t)
	hook := &counter{}
	c := s.Client(t)
	c.AddHook(hook)
	l, err := New(c, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.oneServer {
		t.Fatal("a single server's Locker does not know it")
	}
	const n = 2*maxPipeline + maxPipeline/2
	ctx := context.Background()
	locks := holdMany(t, l, n)
	owned, err := l.TryLock(ctx, "owned", dlock.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	raw := s.Client(t)
	batchOf := func(locks []dlock.Lock) []driver.Renewal[*hold] {
		b := make([]driver.Renewal[*hold], len(locks))
		for i, lk := range locks {
			b[i] = driver.Renewal[*hold]{Lock: lk.(*hold), TTL: time.Minute}
		}
		return b
	}
	// shorten sets every lock's lease on the server to 10s, so that a
	// renewal shows.
	shorten := func(locks []dlock.Lock) {
		t.Helper()
		if _, err := raw.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, lk := range locks {
				p.PExpire(ctx, lk.(*hold).keys.Lock, 10*time.Second)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// renewed checks that the locks of batch are renewed, but for lost,
	// and returns the round trips taken.
	renew := func(batch []driver.Renewal[*hold], lost int) int64 {
		t.Helper()
		trips := hook.trips.Load()
		errs := l.renew(ctx, batch)
		trips = hook.trips.Load() - trips
		if len(errs) != len(batch) {
			t.Fatalf("%d results for %d locks", len(errs), len(batch))
		}
		for i, err := range errs {
			if i == lost {
				if !errors.Is(err, dlock.ErrOwnershipLost) {
					t.Fatalf("lock %d, gone from the server: %v, want ErrOwnershipLost", i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("lock %d: %v", i, err)
			}
			pttl, err := raw.PTTL(ctx, batch[i].Lock.keys.Lock).Result()
			if err != nil || pttl <= 10*time.Second {
				t.Fatalf("lock %d: PTTL %v (%v) after its renewal, want over 10s", i, pttl, err)
			}
		}
		return trips
	}

	batch := batchOf(locks)
	for _, want := range []int64{1, 1} { // the first pipeline loads the script
		shorten(locks)
		if trips := renew(batch, -1); trips != want {
			t.Errorf("%d locks in %d round trips, want %d", n, trips, want)
		}
	}

	if err := s.ScriptFlush(ctx); err != nil {
		t.Fatal(err)
	}
	shorten(locks)
	if trips := renew(batch, -1); trips != 2 {
		t.Errorf("after SCRIPT FLUSH: %d round trips, want 2 (the pipeline, and again after loading the script)", trips)
	}
	shorten(locks)
	if trips := renew(batch, -1); trips != 1 {
		t.Errorf("after the script was loaded again: %d round trips, want 1", trips)
	}

	gone := maxPipeline + 7
	if err := raw.Del(ctx, batch[gone].Lock.keys.Lock).Err(); err != nil {
		t.Fatal(err)
	}
	shorten(append(locks[:gone:gone], locks[gone+1:]...))
	renew(batch, gone)

	// the owner's lock in the middle chunk; the lock gone, out
	mixed := append(locks[:gone:gone], locks[gone+1:]...)
	mixed = append(mixed[:maxPipeline+1:maxPipeline+1], append([]dlock.Lock{owned}, mixed[maxPipeline+1:]...)...)
	shorten(mixed)
	renew(batchOf(mixed), -1)
}
