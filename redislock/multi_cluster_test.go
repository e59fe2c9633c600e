package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// On a Cluster, LockAll of keys in one slot (one hash tag) takes them in
// one round trip and releases them in one; keys of several slots are taken
// one by one, in order, and released each on its own master.
func TestClusterLockAll(t *testing.T) {
	t.Parallel() // its own servers
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hook := &counter{}
	l := lockerOf(t, c.countedClient(t, hook))
	other := lockerOf(t, c.client(t))

	tag := "{" + keyFor(t) + "}"
	for _, tc := range []struct {
		name  string
		keys  []string
		trips int64
	}{
		{"one slot", []string{tag + ":a", tag + ":b", tag + ":c"}, 1},
		{"three masters", []string{c.keyOn(t, 0), c.keyOn(t, 1), c.keyOn(t, 2)}, 3},
	} {
		// the first call reads the topology: not counted
		if err := dlock.DoAll(ctx, l, tc.keys, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("%s: DoAll: %v", tc.name, err)
		}
		hook.trips.Store(0)
		lk, err := dlock.LockAll(ctx, l, tc.keys)
		if err != nil {
			t.Fatalf("%s: LockAll: %v", tc.name, err)
		}
		if n := hook.trips.Load(); n != tc.trips {
			t.Errorf("%s: LockAll of %d keys took %d round trips, want %d", tc.name, len(tc.keys), n, tc.trips)
		}
		for _, k := range tc.keys {
			if _, err := other.TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("%s: %s not held: TryLock = %v", tc.name, k, err)
			}
		}
		hook.trips.Store(0)
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", tc.name, err)
		}
		if n := hook.trips.Load(); n != tc.trips {
			t.Errorf("%s: Unlock of %d keys took %d round trips, want %d", tc.name, len(tc.keys), n, tc.trips)
		}
		for _, k := range tc.keys {
			lk, err := other.TryLock(ctx, k)
			if err != nil {
				t.Fatalf("%s: %s after Unlock: %v", tc.name, k, err)
			}
			lk.Unlock(ctx)
		}

		// busy: nothing taken, the busy key named
		held, err := other.TryLock(ctx, tc.keys[1])
		if err != nil {
			t.Fatal(err)
		}
		var busy *dlock.NotAcquiredError
		if _, err := dlock.TryLockAll(ctx, l, tc.keys); !errors.As(err, &busy) || busy.Key != tc.keys[1] {
			t.Fatalf("%s: TryLockAll with %s busy: %v", tc.name, tc.keys[1], err)
		}
		held.Unlock(ctx)
		for _, k := range []string{tc.keys[0], tc.keys[2]} {
			lk, err := other.TryLock(ctx, k)
			if err != nil {
				t.Fatalf("%s: %s after a busy TryLockAll: %v", tc.name, k, err)
			}
			lk.Unlock(ctx)
		}
	}
}
