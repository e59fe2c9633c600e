package redlock

import (
	"context"
	"testing"
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
	onEvery(t, servers, k, true) // the node not waited for has it too
	// The lock expires on one node, where another party's attempt takes
	// it, fails on the other two, and gives it back: that node's counter
	// moved past the holder's fence.
	if err := clients(t, servers[2:])[0].Del(ctx, "dlock:lock:"+k).Err(); err != nil {
		t.Fatal(err)
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
