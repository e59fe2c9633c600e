package etcdlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/observe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// countTTL is the TTL of the Lockers whose round trips are counted: an
// hour, so that no keep-alive (every ttl/3) falls inside a count.
const countTTL = time.Hour

// countedClient returns a client of cl whose gRPC round trips c counts
// (see rtts), closed when t ends.
func countedClient(t testing.TB, cl *etcdtest.Cluster, c *rtts) *clientv3.Client {
	t.Helper()
	cfg := cl.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(c.unary), grpc.WithChainStreamInterceptor(c.stream))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// revision returns the current revision of the cluster of cli: the count
// of its Raft writes so far.
func revision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "count/revision", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// The counts are the contract, checked on a cluster of their own, so
// that no other test's writes are counted: see testUncontended and
// testHandoff. A change that adds a round trip or a Raft write to these
// paths must change the figures here on purpose.
func TestRoundTrips(t *testing.T) {
	cl := etcdtest.Start(t)
	t.Run("uncontended", func(t *testing.T) { testUncontended(t, cl) })
	t.Run("handoff", func(t *testing.T) { testHandoff(t, cl) })
	t.Run("names", func(t *testing.T) { testNames(t, cl) })
}

// A Locker that takes and releases a key over and over writes the same
// few etcd keys, not a new one each time: etcd keeps every key deleted
// since its last compaction in its index, and a transaction's condition on
// the key's range visits them all, so that unique names would make each
// acquisition cost more than the one before it.
func testNames(t *testing.T, cl *etcdtest.Cluster) {
	admin := cl.Client(t)
	l := newLocker(t, cl.Client(t), dlock.WithTTL(countTTL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "count:names"
	rev0 := revision(t, admin)
	for i := range 40 {
		take := l.TryLock
		if i%2 == 1 {
			take = l.Lock
		}
		lk, err := take(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rev1 := revision(t, admin)
	names := map[string]bool{}
	wch := admin.Watch(ctx, "dlock/", clientv3.WithPrefix(), clientv3.WithRev(rev0+1))
	for seen := rev0; seen < rev1; {
		resp, ok := <-wch
		if !ok || resp.Err() != nil {
			t.Fatalf("watch the history: %v", resp.Err())
		}
		for _, ev := range resp.Events {
			seen = max(seen, ev.Kv.ModRevision)
			names[string(ev.Kv.Key)] = true
		}
	}
	if len(names) > 1 {
		t.Errorf("40 cycles wrote %d etcd keys, want 1", len(names))
	}
}

// The counts are the contract: an uncontended Lock and Unlock cycle is
// two round trips and two Raft writes (the put, the delete), with no watch
// of its own; TryLock's cycle is the same.
func testUncontended(t *testing.T, cl *etcdtest.Cluster) {
	admin := cl.Client(t)
	for _, tc := range []struct {
		name string
		take func(l dlock.Locker, ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error)
	}{
		{"Lock", dlock.Locker.Lock},
		{"TryLock", dlock.Locker.TryLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var counted rtts
			var l dlock.Locker = newLocker(t, countedClient(t, cl, &counted), dlock.WithTTL(countTTL))
			ctx := context.Background()
			key := "count:uncontended:" + tc.name
			cycle := func() {
				lk, err := tc.take(l, ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // starts the session
			const cycles = 20
			counted.n.Store(0)
			rev0 := revision(t, admin)
			for range cycles {
				cycle()
			}
			rtt, revs := float64(counted.n.Load())/cycles, float64(revision(t, admin)-rev0)/cycles
			if rtt != 2 || revs != 2 {
				t.Errorf("per uncontended cycle: %.2f round trips, %.2f Raft writes; want 2 and 2", rtt, revs)
			}
		})
	}
}

// handoffRTTs is what a waiting Lock costs in round trips, from its call
// to its release: the transaction that queues it, the watch of the key
// ahead of it, the transaction that takes the lock once that key is gone,
// the watch's cancellation, the release. handoffRevs is its Raft writes:
// its key in the queue, its hold, the release of both.
const handoffRTTs, handoffRevs = 5, 3

// A lock handed from waiter to waiter costs the same round trips whatever
// the number of waiters: each watches the key just ahead of it, and a
// release wakes the next waiter alone.
func testHandoff(t *testing.T, cl *etcdtest.Cluster) {
	for _, n := range []int{2, 8, 24} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rtt, revs := handoff(t, cl, n)
			if rtt > handoffRTTs || revs > handoffRevs {
				t.Errorf("%d waiters: %.2f round trips, %.2f Raft writes per acquisition; want at most %d and %d", n, rtt, revs, handoffRTTs, handoffRevs)
			}
		})
	}
}

// handoff makes n waiters, each on a Locker of its own over one counted
// client, wait for a held key, releases it, and returns the round trips
// and Raft writes per acquisition of the waiters, each of which releases
// the lock at once.
func handoff(t *testing.T, cl *etcdtest.Cluster, n int) (rtt, revs float64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := fmt.Sprintf("count:handoff:%d", n)
	admin := cl.Client(t)
	holder := newLocker(t, admin, dlock.WithTTL(countTTL))
	var counted rtts
	cli := countedClient(t, cl, &counted)
	var rec dlocktest.Recorder
	waiters := make([]dlock.Locker, n)
	for i := range waiters {
		waiters[i] = newLocker(t, cli, dlock.WithTTL(countTTL), dlock.WithObserver(&rec))
		lk, err := waiters[i].TryLock(ctx, key+":warm") // starts the session
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	counted.n.Store(0)
	rev0 := revision(t, admin)
	errs := make(chan error, n)
	for _, w := range waiters {
		go func() {
			lk, err := w.Lock(ctx, key)
			if err == nil {
				err = lk.Unlock(ctx)
			}
			errs <- err
		}()
	}
	rec.WaitFor(t, key, 30*time.Second, fmt.Sprintf("%d waiting", n), func(evs []observe.Event) bool {
		waiting := 0
		for _, e := range evs {
			if e.Kind == observe.Wait {
				waiting++
			}
		}
		return waiting == n
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The holder's release is one write, not the waiters'.
	revs = float64(revision(t, admin)-rev0-1) / float64(n)
	return float64(counted.n.Load()) / float64(n), revs
}
