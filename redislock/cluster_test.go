package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// testCluster is a Redis Cluster for the tests that need keys on several
// shards (see redistest.Cluster), with the test's helpers.
type testCluster struct {
	*redistest.Cluster
	nodes []*redistest.Server // the masters, as started
}

func startCluster(t testing.TB, masters int) *testCluster {
	return startClusterReplicas(t, masters, 0)
}

// startClusterReplicas starts a cluster whose first replicas masters have
// a replica each.
func startClusterReplicas(t testing.TB, masters, replicas int) *testCluster {
	t.Helper()
	c := redistest.StartCluster(t, masters, replicas)
	return &testCluster{Cluster: c, nodes: c.Masters}
}

// client returns a Cluster client, closed when t ends.
func (c *testCluster) client(t testing.TB) *redis.ClusterClient { return c.Client(t) }

// countedClient returns a Cluster client whose node clients count their
// round trips in hook, closed when t ends.
func (c *testCluster) countedClient(t testing.TB, hook *counter) *redis.ClusterClient {
	opts := c.Options()
	opts.NewClient = func(o *redis.Options) *redis.Client {
		n := redis.NewClient(o)
		n.AddHook(hook)
		return n
	}
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// keyOn returns a key of the test whose lock master i serves.
func (c *testCluster) keyOn(t *testing.T, i int) string {
	lo, hi := c.Slots(i)
	for j := 0; ; j++ {
		k := keyFor(t) + ":" + strconv.Itoa(j)
		if s := int(redisnode.Slot("dlock:lock:" + k)); s >= lo && s <= hi {
			return k
		}
	}
}

// clusterSlots reads a node's view of the slots, in the form of go-redis's
// ClusterOptions.ClusterSlots.
func clusterSlots(ctx context.Context, n *redis.Client) ([]redis.ClusterSlot, error) {
	//lint:ignore SA1019 the ClusterSlots option takes the reply of CLUSTER SLOTS
	return n.ClusterSlots(ctx).Result()
}

// lockUnlock waits up to wait for key in a goroutine, releases it, and
// sends the first error, or nil.
func lockUnlock(ctx context.Context, l *Locker, key string, wait time.Duration) <-chan error {
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, key, dlock.WithWait(wait))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	return got
}

// holderAndWaiter returns two Lockers with minute-long leases, closed when
// t ends; the waiter's fallback sleep is an hour, so that only a wake-up
// can hand it a lock in time.
func holderAndWaiter(t *testing.T, hc, wc redis.UniversalClient) (holder, waiter *Locker) {
	t.Helper()
	holder, err := New(hc, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	waiter, err = New(wc, dlock.WithTTL(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	return holder, waiter
}

// One Locker's waiters are woken on every shard: a release on any master
// hands the lock to the waiter at once. The waiter's fallback sleep is
// longer than its wait, so only the wake-up can get it the lock in time.
func TestClusterWakesWaitersOnEveryShard(t *testing.T) {
	t.Parallel() // its own servers
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, waiter := holderAndWaiter(t, c.client(t), c.client(t))
	for i := range c.nodes {
		key := c.keyOn(t, i)
		held, err := holder.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := lockUnlock(ctx, waiter, key, 10*time.Second)
		for { // until the waiter has queued
			info, err := holder.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiters == 1 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("shard %d: the waiter never queued", i)
			case <-time.After(5 * time.Millisecond): // poll interval, bounded by ctx
			}
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("shard %d: the waiter was not woken by the release: %v", i, err)
		}
	}
}

// migrate moves slot s from master from to master to (see
// redistest.Cluster.Migrate), failing t on an error.
func (c *testCluster) migrate(t *testing.T, s, from, to int, between func(stage string)) {
	t.Helper()
	if err := c.Migrate(context.Background(), s, from, to, between); err != nil {
		t.Fatal(err)
	}
}

// A waiter's subscription follows its key's slot to another master: the
// master that gave the slot away ends the subscription, the Locker
// subscribes again on the new one, and the release there wakes the waiter.
//
// With a stale client, the Locker first subscribes again where the slot
// was, is refused (MOVED), and tries again until the client has the new
// topology. The waiter's client here reads the topology the test gives it:
// the old one until well after the migration.
func TestClusterSubscriptionFollowsSlot(t *testing.T) {
	t.Parallel() // each case starts a cluster of its own and waits on it
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			t.Parallel()
			followSlot(t, stale)
		})
	}
}

func followSlot(t *testing.T, stale bool) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var old atomic.Pointer[[]redis.ClusterSlot] // when set, the topology the waiter's client reads
	opts := c.client(t).Options()
	opts.ClusterSlots = func(ctx context.Context) ([]redis.ClusterSlot, error) {
		if o := old.Load(); o != nil {
			return *o, nil
		}
		return clusterSlots(ctx, c.nodes[2].Client(t))
	}
	wc := redis.NewClusterClient(opts)
	t.Cleanup(func() { wc.Close() }) // after the Lockers on it close
	holder, waiter := holderAndWaiter(t, c.client(t), wc)
	key := c.keyOn(t, 0)
	ks, err := redisnode.Of("dlock", key)
	if err != nil {
		t.Fatal(err)
	}
	channel := ks.Queue + ":" + waiter.sub
	subscribers := func(node int) int64 {
		n, err := c.nodes[node].Client(t).Do(ctx, "PUBSUB", "SHARDNUMSUB", channel).Slice()
		if ctx.Err() != nil {
			return -1 // until says what never happened
		}
		if err != nil || len(n) != 2 {
			t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", n, err)
		}
		return n[1].(int64)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("never: %s", what)
			case <-time.After(5 * time.Millisecond): // poll interval, bounded by ctx
			}
		}
	}

	held, err := holder.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := lockUnlock(ctx, waiter, key, 30*time.Second)
	until("the waiter subscribed on master 0", func() bool { return subscribers(0) == 1 })
	if stale {
		slots, err := clusterSlots(ctx, c.nodes[2].Client(t))
		if err != nil {
			t.Fatal(err)
		}
		old.Store(&slots)
	}
	c.migrate(t, int(redisnode.Slot("dlock:lock:"+key)), 0, 1, nil)
	if stale {
		// The fault: the client keeps the old topology for a while, in
		// which the Locker's new subscription is refused.
		time.Sleep(300 * time.Millisecond)
		old.Store(nil)
	}
	until("the subscription moved to master 1", func() bool { return subscribers(1) == 1 })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter was not woken on the slot's new master: %v", err)
	}
}

// A lock whose slot migrates while it is held stays held: its renewals
// follow the slot (ASK while its keys move, MOVED after), and its release
// finds it on the new master.
func TestClusterHoldThroughMigration(t *testing.T) {
	t.Parallel() // its own servers; it waits on the migration and leases
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A lease of a second: a renewal a third of it apart, and two thirds
	// for its reply on a loaded machine.
	l, err := New(c.client(t), dlock.WithTTL(time.Second), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := c.keyOn(t, 0)
	lk, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// outlive waits a lease and a half (the lease was renewed in between),
	// failing if the hold ends meanwhile.
	outlive := func(stage string) {
		t.Helper()
		select {
		case <-lk.Done():
			t.Fatalf("%s: the hold ended: %v", stage, lk.Err())
		case <-time.After(1500 * time.Millisecond):
		}
	}
	c.migrate(t, int(redisnode.Slot("dlock:lock:"+key)), 0, 1, outlive)
	outlive("moved")
	raw := c.nodes[1].Client(t)
	if n, err := raw.Exists(ctx, "dlock:lock:"+key).Result(); err != nil || n != 1 {
		t.Fatalf("the lock key on its new master: %d, %v", n, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the migration: %v", err)
	}
	if n, err := raw.Exists(ctx, "dlock:lock:"+key).Result(); err != nil || n != 0 {
		t.Fatalf("the lock key after Unlock: %d, %v", n, err)
	}
}

// role is a node's ROLE: "master" or "slave".
func role(t *testing.T, n *redistest.Server) string {
	r, err := redistest.Role(context.Background(), n)
	if err != nil {
		return err.Error()
	}
	return r
}

// Through a failover of its master, clean (CLUSTER FAILOVER) or after a
// kill, a lock is either kept or reported lost: once the new master is in
// place, a holder that believes it holds the lock does, for nobody else can
// take it; and fences keep rising.
func TestClusterFailover(t *testing.T) {
	t.Parallel() // its own servers; it waits on failovers and leases, not on the CPU
	c := startClusterReplicas(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := New(c.client(t), dlock.WithTTL(time.Second), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := New(c.client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	key := c.keyOn(t, 0)
	until := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatalf("never: %s", what)
			case <-time.After(20 * time.Millisecond): // poll interval, bounded by ctx
			}
		}
	}
	// lock takes the lock once the cluster serves the key again: within
	// 10s of the failover, for the Locker makes its client read the new
	// topology when a node stops answering (go-redis alone reads it every
	// 60s).
	lock := func(after uint64) dlock.Lock {
		t.Helper()
		var lk dlock.Lock
		deadline := time.Now().Add(10 * time.Second)
		var err error
		until("the lock is taken again", func() bool {
			if time.Now().After(deadline) {
				t.Fatalf("the lock could not be taken 10s after the failover: %v", err)
			}
			lk, err = l.Lock(ctx, key, dlock.WithWait(5*time.Second))
			return err == nil
		})
		if lk.Fence() <= after {
			t.Fatalf("fence %d after a failover, %d before: not rising", lk.Fence(), after)
		}
		return lk
	}
	// keptOrLost checks the hold two leases after a failover.
	keptOrLost := func(stage string, lk dlock.Lock) {
		t.Helper()
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), dlock.ErrLockLost) {
				t.Fatalf("%s: the hold ended with %v, want a loss", stage, lk.Err())
			}
		case <-time.After(2 * time.Second):
			if _, err := other.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("%s: the holder believes it holds the lock, yet another TryLock = %v", stage, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("%s: Unlock on the new master: %v", stage, err)
			}
		}
	}

	lk := lock(0)
	master, replica := c.nodes[0], c.Replicas[0]
	if err := replica.Client(t).Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatal(err)
	}
	until("the replica took over", func() bool { return role(t, replica) == "master" && role(t, master) == "slave" })
	keptOrLost("clean failover", lk)

	lk = lock(lk.Fence())
	replica.Kill()
	until("the old master took over again", func() bool { return role(t, master) == "master" })
	keptOrLost("master killed", lk)
	lk = lock(lk.Fence())
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// On a Cluster, a replica acknowledges on the shard of the key: a key
// whose master has a replica is acknowledged, held and renewed; a key
// whose master has none falls short, and nothing of it stays.
func TestClusterReplicaAck(t *testing.T) {
	t.Parallel() // its own servers; it waits on failovers and leases, not on the CPU
	c := startClusterReplicas(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A lease of 1s renewed every third of it, with room for a renewal's
	// acknowledgement on a loaded machine (at 300ms, one late
	// acknowledgement lost the lock).
	l, err := New(c.client(t), WithReplicaAck(1, 500*time.Millisecond), dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, c.keyOn(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	select { // three leases, renewed with acknowledgements
	case <-lk.Done():
		t.Fatalf("the acknowledged lock ended: %v", lk.Err())
	case <-time.After(3 * time.Second):
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	key := c.keyOn(t, 1)
	if _, err := l.TryLock(ctx, key); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("TryLock on a master without replica = %v, want ErrNotReplicated", err)
	}
	if n, err := c.nodes[1].Client(t).Exists(ctx, "dlock:lock:"+key).Result(); err != nil || n != 0 {
		t.Errorf("the lock key after a shortfall: %d, %v", n, err)
	}
}

// incrGate is a go-redis hook that holds every INCR sent alone until open
// is closed (and nothing else: the Cluster client's own commands pass),
// and records the size of every pipeline.
type incrGate struct {
	gate
}

func (g *incrGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	held := g.gate.ProcessHook(next)
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "incr" {
			return next(ctx, cmd)
		}
		return held(ctx, cmd)
	}
}

// On a Cluster, a Locker's commands go to each master through a coalescer
// of its own: commands that find every flush to master 0 busy leave
// together in one pipeline to it, while commands for master 1 go out at
// once, not held up by master 0.
func TestClusterCoalescesPerNode(t *testing.T) {
	t.Parallel() // its own servers
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := &incrGate{gate: *newGate()}
	opts := c.Options()
	opts.NewClient = func(o *redis.Options) *redis.Client {
		n := redis.NewClient(o)
		if o.Addr == c.nodes[0].Addr() {
			n.AddHook(g)
		}
		return n
	}
	cc := redis.NewClusterClient(opts)
	defer cc.Close()
	p := newProcessor(cc).(*clusterProcessor)
	on0, on1 := "dlock:lock:"+c.keyOn(t, 0), "dlock:lock:"+c.keyOn(t, 1)

	var first []<-chan *redis.IntCmd
	for range redisnode.MaxFlushes {
		first = append(first, incr(ctx, p, on0))
	}
	dlocktest.Eventually(t, 5*time.Second, "every flush to master 0 at the gate", func() bool { return g.held.Load() == redisnode.MaxFlushes })
	const queued = 10
	var rest []<-chan *redis.IntCmd
	for range queued {
		rest = append(rest, incr(ctx, p, on0))
	}
	node, err := cc.MasterForKey(ctx, on0)
	if err != nil {
		t.Fatal(err)
	}
	co := p.coalescer(node)
	dlocktest.Eventually(t, 5*time.Second, "commands queued for master 0", func() bool { _, q := co.Busy(); return q == queued })

	other := within(t, incr(ctx, p, on1), 5*time.Second, "a command to master 1 while master 0's are held")
	if n, err := other.Result(); err != nil || n != 1 {
		t.Fatalf("INCR on master 1 = %d, %v", n, err)
	}
	close(g.open)
	for i, ch := range append(first, rest...) {
		if n, err := within(t, ch, 5*time.Second, "a reply").Result(); err != nil || n < 1 || n > redisnode.MaxFlushes+queued {
			t.Fatalf("command %d: INCR = %d, %v", i, n, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	biggest := 0
	for _, n := range g.batches {
		biggest = max(biggest, n)
	}
	if biggest < queued-redisnode.MaxFlushes {
		t.Errorf("pipelines to master 0 of %v commands: the queued ones did not leave together", g.batches)
	}
}
