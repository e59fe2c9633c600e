package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// A node that missed an acquisition, because the release of the one
// before had not reached it yet, is behind the others by one step of its
// fence counter. The next acquisition that it answers among the first
// majority must not cost a second round trip (raise.lua) to bring it up:
// an uncontended Locker does this at every cycle whose release to the
// slowest node is overtaken by the next attempt.
func TestLaggingNodeCostsNoRaise(t *testing.T) {
	ctx := context.Background()
	cs := clients(t, shared)
	gates := make([]*nodeHook, len(cs))
	for i, c := range cs {
		gates[i] = &nodeHook{}
		c.AddHook(gates[i])
	}
	raises := func() (n int64) {
		for _, g := range gates {
			n += g.calls("raise")
		}
		return n
	}
	l, err := New(cs, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	k := keyFor(t)
	cycle := func(what string) dlock.Lock {
		t.Helper()
		lk, err := l.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("%s: TryLock: %v", what, err)
		}
		return lk
	}
	unlock := func(what string, lk dlock.Lock) {
		t.Helper()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", what, err)
		}
	}

	// free waits until nodes no longer hold the lock.
	free := func(what string, nodes ...int) {
		t.Helper()
		for _, i := range nodes {
			dlocktest.Eventually(t, 10*time.Second, what, func() bool {
				n, _ := cs[i].Exists(ctx, "dlock:lock:"+k).Result()
				return n == 0
			})
		}
	}
	unlock("first", cycle("first"))
	free("the first acquisition released", 0, 1, 2, 3, 4)
	// Node 4 takes the second acquisition but its reply never comes, so
	// that its release is not waited for, and runs only after the next
	// acquisition.
	openReply := gates[4].holdReply(acquireScript)
	openRelease := gates[4].hold(releaseScript)
	defer openReply()
	lk := cycle("second")
	dlocktest.Eventually(t, 10*time.Second, "node 4 holds the second acquisition", func() bool {
		v, _ := cs[4].Get(ctx, "dlock:lock:"+k).Result()
		return v == lk.Token()
	})
	unlock("second", lk)
	unlock("third", cycle("third")) // busy on node 4: its counter stays behind
	openRelease()
	free("the second acquisition released on node 4", 4)
	// The fourth acquisition's majority is nodes 2, 3 and 4: nodes 0 and 1
	// answer after it.
	before := raises()
	open0, open1 := gates[0].hold(acquireScript), gates[1].hold(acquireScript)
	lk = cycle("fourth")
	open0()
	open1()
	if n := raises() - before; n != 0 {
		t.Errorf("the fourth acquisition sent raise.lua to %d nodes: a lagging node cost a round trip", n)
	}
	unlock("fourth", lk)
}

// Unlock leaves the lock on no node that answered the acquisition, even
// one that answered after the majority did while another still had not:
// its release waits for its own answer, not for the slowest node's. (It
// waited for the whole acquisition to end, so that, right after Unlock,
// the key could be busy on a majority of the nodes, and an immediate
// TryLock failed though nobody held it.)
func TestUnlockReleasesLateNodes(t *testing.T) {
	ctx := context.Background()
	cs := clients(t, shared)
	hooks := make([]*nodeHook, len(cs))
	for i, c := range cs {
		hooks[i] = &nodeHook{}
		c.AddHook(hooks[i])
	}
	l, err := New(cs, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	k := keyFor(t)
	open3, open4 := hooks[3].hold(acquireScript), hooks[4].hold(acquireScript)
	defer open4()
	lk, err := l.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	open3() // node 3 answers late; node 4 not at all until its timeout
	dlocktest.Eventually(t, 10*time.Second, "node 3 holds the lock", func() bool {
		v, _ := cs[3].Get(ctx, "dlock:lock:"+k).Result()
		return v == lk.Token()
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for i, c := range cs {
		if v, _ := c.Get(ctx, "dlock:lock:"+k).Result(); v != "" {
			t.Errorf("after Unlock, node %d still holds the lock", i)
		}
	}
}

// A waiter handed the lock by a majority of releases whose fences
// disagree writes the highest to the nodes behind; when the hold there is
// gone by then (a grant heard of that the node took back), the waiter has
// no majority: it gives back what it holds, stays queued and waits on,
// rather than ending its wait with ErrNoQuorum.
func TestGrantTakenBackBeforeFence(t *testing.T) {
	ctx := context.Background()
	servers := shared[:3]
	hooked := func() ([]redis.UniversalClient, []*nodeHook) {
		cs := clients(t, servers)
		hooks := make([]*nodeHook, len(cs))
		for i, c := range cs {
			hooks[i] = &nodeHook{}
			c.AddHook(hooks[i])
		}
		return cs, hooks
	}
	hcs, hhooks := hooked()
	holder, err := New(hcs, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	cs, hooks := hooked()
	waiter, err := New(cs, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	k := keyFor(t)
	held, err := holder.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	dlocktest.Eventually(t, 10*time.Second, "the holder holds every node", func() bool {
		for _, c := range cs {
			if v, _ := c.Get(ctx, "dlock:lock:"+k).Result(); v != held.Token() {
				return false
			}
		}
		return true
	})
	type result struct {
		lk  dlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		lk, err := waiter.Lock(ctx, k, dlock.WithWait(20*time.Second))
		got <- result{lk, err}
	}()
	dlocktest.Eventually(t, 10*time.Second, "the waiter queued on every node", func() bool {
		for _, c := range cs {
			if n, _ := c.ZCard(ctx, "{dlock:lock:"+k+"}:q").Result(); n == 0 {
				return false
			}
		}
		return true
	})
	// Nodes 0 and 1 hand the lock over first, node 0 with a fence far
	// above node 1's, which the waiter must then raise; the hold there is
	// gone by then.
	if err := cs[0].HIncrBy(ctx, "{dlock:lock:"+k+"}:m", "f", 1<<60).Err(); err != nil {
		t.Fatal(err)
	}
	openRaise := hooks[1].hold(raiseScript)
	openRelease := hhooks[2].hold(releaseScript)
	unlocked := make(chan error, 1)
	go func() { unlocked <- held.Unlock(ctx) }()
	dlocktest.Eventually(t, 10*time.Second, "the waiter raising node 1", func() bool { return hooks[1].calls("raise") > 0 })
	if err := cs[1].Del(ctx, "dlock:lock:"+k).Err(); err != nil {
		t.Fatal(err)
	}
	openRaise()
	openRelease()
	if err := <-unlocked; err != nil {
		t.Fatalf("the holder's Unlock: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("Lock after a grant was taken back: %v", r.err)
		}
		if err := r.lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Lock did not return")
	}
}
