package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// TestGrantedUnlockWaitsForEveryNode: the Unlock of a lock that releases
// handed over waits, as that of a lock taken by an attempt does, for every
// node that answered the waiter's attempt, not only for the nodes that
// handed it over. Returning earlier leaves the release in flight on the
// slowest node, where the Locker's next request then opens a connection
// of its own.
func TestGrantedUnlockWaitsForEveryNode(t *testing.T) {
	servers := start(t, 3)
	ctx := context.Background()
	key := keyFor(t)
	// Node 2's lock belongs to a party of its own: nodes 0 and 1 alone
	// hand the lock over.
	if err := clients(t, servers[2:])[0].Set(ctx, "dlock:lock:"+key, "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	a := newLocker(t, servers, dlock.WithTTL(time.Minute))
	gate := newReleaseGate()
	bcs := clients(t, servers)
	bcs[2].AddHook(gate)
	b, err := New(bcs, WithNodeTimeout(testTimeout), dlock.WithTTL(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(gate.open)
		}
	}
	defer open()

	la, err := a.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lock, 1)
	go func() {
		lk, err := b.Lock(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	ks, err := redisnode.Of("dlock", key)
	if err != nil {
		t.Fatal(err)
	}
	raw := clients(t, servers)
	dlocktest.Eventually(t, 10*time.Second, "B queued on every node", func() bool {
		for _, c := range raw {
			if c.ZCard(ctx, ks.Queue).Val() != 1 {
				return false
			}
		}
		return true
	})
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- lb.Unlock(ctx) }()
	<-gate.sent // node 2 ran the release; its reply waits at the gate
	select {
	case err := <-unlocked:
		t.Fatalf("Unlock returned (%v) while node 2's release was unanswered", err)
	case <-time.After(100 * time.Millisecond): // ample for an Unlock that does not wait
	}
	open()
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
}
