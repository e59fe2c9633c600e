package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
)

// Inspect reports the holder's fence, not the largest counter of any
// node: a node outside the holder's majority may have moved its counter
// past it for an attempt that failed. (It reported the largest counter,
// so that an election observer saw two leaders with one epoch.)
func TestInspectFenceIsTheHolders(t *testing.T) {
	ctx := context.Background()
	servers := shared[:3]
	a, c := newLocker(t, servers), newLocker(t, servers)
	k := keyFor(t)
	lk, err := a.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	// The lock expires on one node, where another party's attempt takes
	// it, fails on the other two, and gives it back: that node's counter
	// moves past the holder's fence. The node is one that the acquisition
	// did not reach, if any (TryLock returns on a majority; a node that
	// did not answer in time may never have run it); else one that it
	// reached, whose key is deleted.
	cs := clients(t, servers)
	var missing []int
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		missing = missing[:0]
		for i, c := range cs {
			if v, err := c.Get(ctx, "dlock:lock:"+k).Result(); err != nil || v != lk.Token() {
				missing = append(missing, i)
			}
		}
		if len(missing) == 0 || time.Now().After(end) {
			break
		}
	}
	switch len(missing) {
	case 0:
		if err := cs[2].Del(ctx, "dlock:lock:"+k).Err(); err != nil {
			t.Fatal(err)
		}
	case 1:
	default:
		t.Fatalf("the lock is missing on nodes %v of 3", missing)
	}
	if _, err := c.TryLock(ctx, k); err == nil {
		t.Fatal("another Locker took a lock held on two of three nodes")
	}
	info, err := a.Inspect(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Fence != lk.Fence() {
		t.Errorf("Inspect: held %v, fence %d; want held with the holder's fence %d", info.Held, info.Fence, lk.Fence())
	}
}

// Inspect's waiters are the majority's view, as its holder is: a waiter
// queued on one node of three (its attempt still on its way to the
// others) is no waiter yet; queued on two, it is.
func TestInspectWaitersOfAMajority(t *testing.T) {
	l := &Locker{quorum: 2}
	for _, c := range []struct {
		waiters []int
		want    int
	}{
		{[]int{1, 0, 0}, 0},
		{[]int{1, 1, 0}, 1},
		{[]int{2, 1, 0}, 1},
		{[]int{3, 2, 2}, 2},
		{[]int{1, 1}, 1},
	} {
		states := map[int]redisnode.State{}
		for i, n := range c.waiters {
			states[i] = redisnode.State{Waiters: n}
		}
		if got := l.majority("k", states).Waiters; got != c.want {
			t.Errorf("waiters by node %v: Inspect says %d; want %d", c.waiters, got, c.want)
		}
	}
}
