package redislock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

// The counts of the hot paths are a contract: a change that adds a round
// trip, a Redis call or allocations to an uncontended cycle fails here and
// must change the figure on purpose. Round trips and calls are exact; the
// allocations are those of a build without the race detector, which adds
// two or three and moves them by one (allocMargin).
func TestHotPathCounts(t *testing.T) {
	s := redistest.Start(t) // its own server: INFO commandstats counts every client's calls
	ctx := context.Background()
	raw := s.Client(t)
	cycle := func(l *Locker, take func(context.Context, *Locker, string) (dlock.Lock, error)) func(key string) error {
		return func(key string) error {
			lk, err := take(ctx, l, key)
			if err != nil {
				return err
			}
			return lk.Unlock(ctx)
		}
	}
	try := func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryLock(ctx, key) }
	for _, tc := range []struct {
		name   string
		opts   []dlock.Option
		take   func(context.Context, *Locker, string) (dlock.Lock, error)
		trips  int64 // round trips per cycle
		calls  int64 // Redis calls per cycle, scripts' inner calls included
		allocs float64
	}{
		// SET NX PX, then the release script: EVALSHA, the MGET that
		// reads the lock and whether anyone waits or watches, and DEL:
		// the floor's four.
		// The SET's reply is read as a bool: go-redis reads OK or nil
		// without an error (a nil reply read as redis.Nil costs it about
		// twenty allocations).
		{name: "plain", take: try, trips: 2, calls: 4, allocs: 14},
		{name: "wait", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.Lock(ctx, key) }, trips: 2, calls: 4, allocs: 15},
		{name: "fenced", opts: []dlock.Option{dlock.WithFencing(true)}, take: try, trips: 2, calls: 6, allocs: 14},
		{name: "owner", opts: []dlock.Option{dlock.WithOwner("counts")}, take: try, trips: 2, calls: 14, allocs: 16},
		{name: "fair", opts: []dlock.Option{dlock.WithFair(true)}, take: try, trips: 2, calls: 8, allocs: 15},
		{name: "semaphore", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryAcquire(ctx, key, 3) }, trips: 2, calls: 30, allocs: 19},
		{name: "read", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryRLock(ctx, key) }, trips: 2, calls: 30, allocs: 18},
		{name: "write", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryWLock(ctx, key) }, trips: 2, calls: 29, allocs: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &counter{}
			c := s.Client(t)
			c.AddHook(hook)
			l := lockerOf(t, c, append([]dlock.Option{dlock.WithTTL(time.Minute)}, tc.opts...)...)
			run := cycle(l, tc.take)
			key := "counts:" + tc.name
			if err := run(key); err != nil { // loads the scripts
				t.Fatal(err)
			}
			const n = 20
			if err := raw.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			hook.trips.Store(0)
			for range n {
				if err := run(key); err != nil {
					t.Fatal(err)
				}
			}
			trips := hook.trips.Load()
			calls, err := redistest.Calls(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(allocRuns, func() {
				if err := run(key); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: %.2f round trips, %.2f Redis calls, %.1f allocations per cycle", tc.name, float64(trips)/n, float64(calls)/n, allocs)
			if trips != tc.trips*n {
				t.Errorf("%d round trips in %d cycles, want %d each", trips, n, tc.trips)
			}
			if calls != tc.calls*n {
				t.Errorf("%d Redis calls in %d cycles, want %d each", calls, n, tc.calls)
			}
			if allocs > tc.allocs+allocMargin {
				t.Errorf("%.1f allocations per cycle, want %.0f (and a margin of %d)", allocs, tc.allocs, allocMargin)
			}
		})
	}
}

// A TryLock of a key another party holds: the bare SET, refused, and the
// GET that asks whether the key holds this attempt's own token (a SET
// that go-redis sent twice would find it so). Two round trips and two
// Redis calls, the busy path's contract; the floor's is one.
func TestBusyTryLockCounts(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	raw := s.Client(t)
	holder := lockerOf(t, s.Client(t), dlock.WithTTL(time.Minute))
	key := "counts:busy"
	if _, err := holder.TryLock(ctx, key); err != nil {
		t.Fatal(err)
	}
	hook := &counter{}
	c := s.Client(t)
	c.AddHook(hook)
	l := lockerOf(t, c, dlock.WithTTL(time.Minute))
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) { // dials the connection
		t.Fatalf("TryLock of a held key = %v; want ErrNotAcquired", err)
	}
	const n = 20
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hook.trips.Store(0)
	for range n {
		if _, err := l.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held key = %v; want ErrNotAcquired", err)
		}
	}
	trips := hook.trips.Load()
	calls, err := redistest.Calls(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if trips != 2*n || calls != 2*n {
		t.Errorf("%d round trips and %d Redis calls in %d busy attempts; want 2 and 2 each", trips, calls, n)
	}
}

// coalescedTrips bounds the round trips per uncontended cycle of 64
// goroutines of one Locker, each on a key of its own: their commands share
// pipelines (see the package doc), so that a cycle costs a fraction of the
// two round trips it costs alone. Measured on 2 cores: 0.06, and 0.055 to
// 0.14 under the race detector on a loaded machine.
const coalescedTrips = 0.3

// The round trips of a Locker's goroutines are shared: 64 goroutines
// cycling at once make far fewer round trips than cycles, and each cycle
// still makes the floor's four Redis calls.
func TestCoalescedCounts(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	raw := s.Client(t)
	hook := &counter{}
	c := s.Client(t)
	c.AddHook(hook)
	l := lockerOf(t, c, dlock.WithTTL(time.Minute))
	const goroutines, cycles = 64, 200
	cycle := func(key string) error {
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			return err
		}
		return lk.Unlock(ctx)
	}
	parallel(t, goroutines, func(i int) error { return cycle(fmt.Sprint("counts:coalesced:", i)) }) // loads the script
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hook.trips.Store(0)
	parallel(t, goroutines, func(i int) error {
		for range cycles {
			if err := cycle(fmt.Sprint("counts:coalesced:", i)); err != nil {
				return err
			}
		}
		return nil
	})
	n := float64(goroutines * cycles)
	trips := float64(hook.trips.Load()) / n
	calls, err := redistest.Calls(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d goroutines: %.3f round trips, %.2f Redis calls per cycle", goroutines, trips, float64(calls)/n)
	if trips > coalescedTrips {
		t.Errorf("%.3f round trips per cycle from %d goroutines, want at most %.1f", trips, goroutines, coalescedTrips)
	}
	if calls != 4*goroutines*cycles {
		t.Errorf("%d Redis calls in %d cycles, want 4 each", calls, goroutines*cycles)
	}
}
