package redlock

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
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

// TestHandOffCounts: the calls each node runs for a hand-off are a
// contract too. A holds the key, B's Lock queues on every node (its
// Locker is subscribed already, so the Lock joins the queues at once),
// A's Unlock hands each node's part to B, and B's Unlock frees the key:
// one uncontended cycle (TestHotPathCounts' plain figure) plus a queued
// attempt and a release that grants. The calls of the hand-off are the
// difference.
func TestHandOffCounts(t *testing.T) {
	const (
		plain   = 10 // TestHotPathCounts' plain cycle, on each node
		handOff = 22 // a queued attempt and a release that grants, on each node
	)
	servers := start(t, 3)
	ctx := context.Background()
	raw := clients(t, servers)
	byA, done := &repliedHook{}, &repliedHook{}
	acs := clients(t, servers)
	for _, c := range acs {
		c.AddHook(byA)
	}
	a, err := New(acs, WithNodeTimeout(testTimeout), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bcs := clients(t, servers)
	for _, c := range bcs {
		c.AddHook(done)
	}
	// A fallback far beyond a round (no attempt but the queued one), and
	// short enough for a TTL of a minute that the queued attempt counts
	// its place (see rediswait.MaxStretch).
	b, err := New(bcs, WithNodeTimeout(testTimeout), dlock.WithTTL(time.Minute), dlock.WithRetry(dlock.FixedInterval(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := keyFor(t)
	round := func() {
		t.Helper()
		tried := byA.tried.Load()
		la, err := a.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// TryLock returns once a majority granted it: B begins when
		// every node did.
		dlocktest.Eventually(t, 10*time.Second, "the waiter's attempt answered by every node", func() bool { return byA.tried.Load() >= tried+int64(len(servers)) })
		before := done.queued.Load()
		got := make(chan error, 1)
		var lb dlock.Lock
		go func() {
			var err error
			lb, err = b.Lock(ctx, key)
			got <- err
		}()
		dlocktest.Eventually(t, 10*time.Second, "the queued attempt answered by every node", func() bool { return done.queued.Load() >= before+int64(len(servers)) })
		if err := la.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		released := done.released.Load()
		if err := lb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// B's Unlock returns once the nodes that handed the lock over
		// answered: the next round begins when every node did.
		dlocktest.Eventually(t, 10*time.Second, "the release answered by every node", func() bool { return done.released.Load() >= released+int64(len(servers)) })
	}
	round() // loads the scripts and subscribes B's Locker
	for _, c := range raw {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 10
	for range n {
		round()
	}
	for i, c := range raw {
		calls, err := redistest.Calls(ctx, c.(*redis.Client))
		if err != nil {
			t.Fatal(err)
		}
		stats, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var each []string
		for _, line := range strings.Split(stats, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if ok && name != "info" && !strings.HasPrefix(name, "config") {
				each = append(each, name+" "+rest[:strings.IndexByte(rest, ',')])
			}
		}
		t.Logf("node %d: %.2f calls per round (%s in %d rounds)", i, float64(calls)/n, strings.Join(each, ", "), n)
		if calls != (plain+handOff)*n {
			t.Errorf("node %d: %d calls in %d rounds, want %d each (%d of them the hand-off's)", i, calls, n, plain+handOff, handOff)
		}
	}
}

// repliedHook counts the attempts that got their reply, plain and queued
// (acquire.lua with its wait argument set), and the releases.
type repliedHook struct{ tried, queued, released atomic.Int64 }

func (h *repliedHook) count(cmd redis.Cmder) {
	switch {
	case acquireScript.Runs(cmd) && len(cmd.Args()) > 3+6+3 && cmd.Args()[3+6+3] == "1":
		h.queued.Add(1)
	case acquireScript.Runs(cmd):
		h.tried.Add(1)
	case releaseScript.Runs(cmd):
		h.released.Add(1)
	}
}

func (h *repliedHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *repliedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h *repliedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return err
	}
}
