package driver

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The lease heap keeps its order and every lease's index through random
// pushes, changes of due time (one at a time, or many and then one
// reordering) and removals: its root is always a lease
// due first, and popping it all yields the due times in order.
func TestLeaseHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h leaseHeap[*lease]
	due := map[*lease]int64{}
	check := func() {
		t.Helper()
		for i, e := range h.es {
			lk, _ := h.slot(e.slot)
			if got := h.index(lk); got != i {
				t.Fatalf("entry %d has index %d", i, got)
			}
			if e.due != due[lk] {
				t.Fatalf("entry %d due %d, want %d", i, e.due, due[lk])
			}
			if i > 0 && e.before(h.es[(i-1)/arity]) {
				t.Fatalf("entry %d due %d before its parent's %d", i, e.due, h.es[(i-1)/arity].due)
			}
		}
	}
	for step := range 5000 {
		switch op := rng.IntN(5); {
		case op == 4: // a batch of sets, then one order
			for range rng.IntN(h.len() + 1) {
				i := rng.IntN(h.len())
				lk, _ := h.slot(h.es[i].slot)
				due[lk] = rng.Int64N(1000)
				h.set(i, due[lk])
			}
			h.order()
		case op <= 1 || h.len() == 0:
			lk := &lease{}
			due[lk] = rng.Int64N(1000)
			h.push(lk, due[lk])
		case op == 2:
			i := rng.IntN(h.len())
			lk, _ := h.slot(h.es[i].slot)
			due[lk] = rng.Int64N(1000)
			h.fix(i, due[lk])
		default:
			i := rng.IntN(h.len())
			want, _ := h.slot(h.es[i].slot)
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

// A lease's state goes into the heap's table with the lease, is kept
// there while the lease is in the heap (its handle's copy goes stale), and
// comes back to the handle when the lease leaves.
func TestLeaseHeapState(t *testing.T) {
	var h leaseHeap[*lease]
	lk, other := &lease{}, &lease{}
	lk.gen, lk.ttl = 3, time.Second
	s := h.push(lk, 10)
	h.push(other, 5)
	got, ls := h.slot(s)
	if got != lk || ls.gen != 3 || ls.ttl != time.Second {
		t.Fatalf("slot %d has %p gen %d ttl %v, want %p gen 3 ttl 1s", s, got, ls.gen, ls.ttl, lk)
	}
	ls.gen, ls.inflight = 4, true
	if lk.gen != 3 || lk.inflight {
		t.Fatalf("the handle changed while in the heap: gen %d inflight %v", lk.gen, lk.inflight)
	}
	if i := h.indexAt(other, s); i != -1 {
		t.Fatalf("indexAt(other, %d) = %d, want -1", s, i)
	}
	h.remove(h.index(lk))
	if lk.gen != 4 || !lk.inflight || lk.ttl != time.Second || lk.slot != 0 {
		t.Fatalf("handle after remove: gen %d inflight %v ttl %v slot %d, want 4 true 1s 0", lk.gen, lk.inflight, lk.ttl, lk.slot)
	}
	if i := h.indexAt(lk, s); i != -1 {
		t.Fatalf("indexAt after remove = %d, want -1", i)
	}
	if got, _ := h.slot(h.first()); got != other {
		t.Fatalf("first is %p, want %p", got, other)
	}
}
