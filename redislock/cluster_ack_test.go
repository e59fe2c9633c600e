package redislock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// keyInSlot returns a key of the test, other than the ones in not, whose
// lock key lives in Cluster slot s.
func keyInSlot(t *testing.T, s uint16, not ...string) string {
	t.Helper()
next:
	for j := 0; ; j++ {
		k := keyFor(t) + ":" + strconv.Itoa(j)
		if redisnode.Slot("dlock:lock:"+k) != s {
			continue
		}
		for _, n := range not {
			if n == k {
				continue next
			}
		}
		return k
	}
}

// With replica acknowledgement, a lock whose slot migrates while it is
// held stays held: its renewals, sent with WAIT to the slot's master,
// follow the slot (ASK while its keys are on the importing master, MOVED
// once the slot is there), and TryLock of another key of the slot works
// at every stage. Masters 0 and 1, between which the slot moves, have a
// replica each.
func TestClusterReplicaAckThroughMigration(t *testing.T) {
	t.Parallel() // its own servers; it waits on failovers and leases, not on the CPU
	c := startClusterReplicas(t, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Renewed every second; an acknowledgement may take 500ms: room for a
	// machine so loaded by -race and parallel tests that the renewer
	// stalls for a second and a half.
	const ttl = 3 * time.Second
	l := lockerOf(t, c.client(t), WithReplicaAck(1, 500*time.Millisecond), dlock.WithTTL(ttl))
	other := lockerOf(t, c.client(t))
	key := c.keyOn(t, 0)
	slot := redisnode.Slot("dlock:lock:" + key)
	lk, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	held := []dlock.Lock{lk}
	used := []string{key}
	// outlive waits past three renewal periods and a half, failing if a
	// hold ends meanwhile.
	outlive := func(stage string) {
		t.Helper()
		select {
		case <-lk.Done():
			t.Fatalf("%s: the hold ended: %v", stage, lk.Err())
		case <-time.After(7 * ttl / 6):
		}
		for _, h := range held {
			if err := h.Err(); err != nil {
				t.Fatalf("%s: the hold of %s ended: %v", stage, h.Key(), err)
			}
		}
	}
	// another takes a new key of the slot, with acknowledgement, and
	// checks that another party finds it held.
	another := func(stage string) {
		t.Helper()
		k := keyInSlot(t, slot, used...)
		used = append(used, k)
		h, err := l.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("%s: TryLock of another key of the slot: %v", stage, err)
		}
		held = append(held, h)
		if _, err := other.TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: another party's TryLock of the key just taken: %v, want ErrNotAcquired", stage, err)
		}
	}
	stages := 0
	c.migrate(t, int(slot), 0, 1, func(stage string) {
		stages++
		outlive(stage)
		another(stage)
		if stage == "keys moved" {
			// Refresh is a write with WAIT too.
			if err := lk.Refresh(ctx, ttl); err != nil {
				t.Fatalf("%s: Refresh: %v", stage, err)
			}
		}
		outlive(stage)
	})
	if stages != 2 {
		t.Fatalf("the migration went through %d stages, want 2", stages)
	}
	outlive("moved")
	another("moved")
	if err := lk.Refresh(ctx, ttl); err != nil {
		t.Fatalf("moved: Refresh: %v", err)
	}
	outlive("moved")
	raw := c.nodes[1].Client(t)
	for _, h := range held {
		if v, err := raw.Get(ctx, "dlock:lock:"+h.Key()).Result(); err != nil || v != h.Token() {
			t.Errorf("the lock key of %s on the slot's new master: %q, %v; want the token", h.Key(), v, err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Errorf("Unlock of %s after the migration: %v", h.Key(), err)
		}
	}
}
