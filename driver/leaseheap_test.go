package driver

import (
	"math/rand/v2"
	"testing"
)

// The lease heap keeps its order and every lease's index through random
// pushes, changes of due time and removals: its root is always a lease
// due first, and popping it all yields the due times in order.
func TestLeaseHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h leaseHeap[*lease]
	due := map[*lease]int64{}
	check := func() {
		t.Helper()
		for i, e := range h.es {
			if got := h.index(e.lk); got != i {
				t.Fatalf("entry %d has index %d", i, got)
			}
			if e.due != due[e.lk] {
				t.Fatalf("entry %d due %d, want %d", i, e.due, due[e.lk])
			}
			if i > 0 && h.es[(i-1)/2].due > e.due {
				t.Fatalf("entry %d due %d before its parent's %d", i, e.due, h.es[(i-1)/2].due)
			}
		}
	}
	for step := range 5000 {
		switch op := rng.IntN(4); {
		case op <= 1 || h.len() == 0:
			lk := &lease{}
			due[lk] = rng.Int64N(1000)
			h.push(lk, due[lk])
		case op == 2:
			i := rng.IntN(h.len())
			lk := h.es[i].lk
			due[lk] = rng.Int64N(1000)
			h.fix(i, due[lk])
		default:
			i := rng.IntN(h.len())
			want := h.es[i].lk
			if got := h.remove(i); got != want || h.index(got) != -1 || got.slot != 0 {
				t.Fatalf("step %d: remove(%d) = %p (index %d, slot %d), want %p (index -1, slot 0)", step, i, got, h.index(got), got.slot, want)
			}
			delete(due, want)
		}
		check()
	}
	if n := len(h.at) - len(h.free); n != h.len() {
		t.Fatalf("%d slots in use for %d leases", n, h.len())
	}
	last := int64(-1)
	for h.len() > 0 {
		lk := h.remove(0)
		if due[lk] < last {
			t.Fatalf("popped due %d after %d", due[lk], last)
		}
		last = due[lk]
	}
}
