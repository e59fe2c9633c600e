package redlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The counts of Redlock's uncontended cycle are a contract, as one
// server's are in redislock: round trips (one per node and request) and
// the calls each node runs, scripts' inner calls included. A change that
// adds one fails here and must change the figure on purpose.
func TestHotPathCounts(t *testing.T) {
	servers := start(t, 3) // servers of its own: INFO commandstats counts every client's calls
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		opts  []dlock.Option
		take  func(context.Context, *Locker, string) (dlock.Lock, error)
		trips int64 // round trips per cycle, all nodes
		calls int64 // calls per cycle on each node
	}{
		{name: "plain", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryLock(ctx, key) }, trips: 6, calls: 10},
		{name: "owner", opts: []dlock.Option{dlock.WithOwner("counts")}, take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryLock(ctx, key) }, trips: 6, calls: 22},
		{name: "read", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryRLock(ctx, key) }, trips: 6, calls: 37},
		{name: "write", take: func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryWLock(ctx, key) }, trips: 6, calls: 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &nodeHook{}
			cs := clients(t, servers)
			raw := clients(t, servers)
			for _, c := range cs {
				c.AddHook(hook)
			}
			l, err := New(cs, append([]dlock.Option{WithNodeTimeout(testTimeout), dlock.WithTTL(time.Minute)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			key := "counts:" + tc.name
			cycle := func() {
				lk, err := tc.take(ctx, l, key)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // loads the scripts
			for _, c := range raw {
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			hook.trips.Store(0)
			const n = 20
			for range n {
				cycle()
			}
			trips := hook.trips.Load()
			var perNode []string
			for i, c := range raw {
				calls, err := redistest.Calls(ctx, c.(*redis.Client))
				if err != nil {
					t.Fatal(err)
				}
				perNode = append(perNode, strconv.FormatFloat(float64(calls)/n, 'f', 2, 64))
				if calls != tc.calls*n {
					t.Errorf("node %d: %d calls in %d cycles, want %d each", i, calls, n, tc.calls)
				}
			}
			t.Logf("%s: %.2f round trips per cycle; calls per cycle on each node: %s", tc.name, float64(trips)/n, strings.Join(perNode, ", "))
			if trips != tc.trips*n {
				t.Errorf("%d round trips in %d cycles, want %d each", trips, n, tc.trips)
			}
		})
	}
}
