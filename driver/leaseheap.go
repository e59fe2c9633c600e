package driver

// leaseHeap orders leases by due time: a min-heap whose entries
// carry their due time beside the lease's slot, so that ordering them
// reads no lease. A watchdog of many leases moves each twice per renewal
// period, and a comparison that reads two leases, scattered in memory,
// cost most of its time. An entry's due is its lease's due as Watchdog.at
// counts it, kept equal by every change to the lease's due under the
// watchdog's mutex.
//
// Every lease in the heap has a slot in tables of the heap's own: at, where
// its entry is in the heap, and st, the lease's handle and its state while
// watched (see Lease). The watchdog's scheduler and renewer read and write
// a lease there, in a few contiguous arrays, and never in its handle, which
// has been out of the processor's cache since the lease's last renewal: the
// handle is read when a lease comes into the heap, and written when it
// leaves. A move within the heap writes to at, and never to a lease.
type leaseHeap[L Leased] struct {
	es   []leaseEntry   // the heap
	at   []int32        // at[slot] is the index in es of the lease of that slot
	st   []leaseSlot[L] // st[slot] is the lease of that slot; zero when free
	free []int32        // the slots no lease has
}

type leaseEntry struct {
	due  int64 // Watchdog.at of the lease's due
	slot int32
}

// before orders entries by due time, and leases due at the same time by
// slot: leases renewed in one batch are due together, and come out of the
// heap in the order of their slots, so that the scheduler and the renewer
// go through the slot table in order rather than at random.
func (e leaseEntry) before(o leaseEntry) bool {
	return e.due < o.due || e.due == o.due && e.slot < o.slot
}

// leaseSlot is a lease in the heap: its handle, and its state, which its
// handle's Lease has again once it leaves the heap.
type leaseSlot[L Leased] struct {
	lk L
	ls Lease
}

// len returns the number of leases in the heap.
func (h *leaseHeap[L]) len() int { return len(h.es) }

// first returns the slot of the lease due first. The heap must not be
// empty.
func (h *leaseHeap[L]) first() int32 { return h.es[0].slot }

// slot returns the lease of slot s and its state. The state is valid until
// the next push or remove.
func (h *leaseHeap[L]) slot(s int32) (L, *Lease) { return h.st[s].lk, &h.st[s].ls }

// index returns where lk is in the heap, or -1 when it is not there.
func (h *leaseHeap[L]) index(lk L) int {
	return h.indexAt(lk, lk.lease().slot-1)
}

// indexAt returns where lk is in the heap when it has slot s, or -1: it
// reads the heap's tables and not lk.
func (h *leaseHeap[L]) indexAt(lk L, s int32) int {
	if s < 0 || int(s) >= len(h.st) || h.st[s].lk != lk {
		return -1
	}
	return int(h.at[s])
}

// push adds lk, due at due, with the state its handle's Lease has, and
// returns its slot. lk must not be in the heap.
func (h *leaseHeap[L]) push(lk L, due int64) int32 {
	var s int32
	if n := len(h.free); n > 0 {
		s, h.free = h.free[n-1], h.free[:n-1]
	} else {
		s = int32(len(h.at))
		h.at = append(h.at, 0)
		h.st = append(h.st, leaseSlot[L]{})
	}
	ls := lk.lease()
	ls.slot = s + 1
	h.st[s] = leaseSlot[L]{lk, *ls}
	h.es = append(h.es, leaseEntry{due, s})
	i := len(h.es) - 1
	h.at[s] = int32(i)
	h.up(i)
	return s
}

// fix sets the due of the lease at index i, and restores the order.
func (h *leaseHeap[L]) fix(i int, due int64) {
	h.es[i].due = due
	if !h.down(i) {
		h.up(i)
	}
}

// set sets the due of the lease at index i, and leaves the heap out of
// order: order restores it, after a batch of sets.
func (h *leaseHeap[L]) set(i int, due int64) { h.es[i].due = due }

// order restores the heap's order after sets: in one pass over the heap,
// which costs less than fixing each entry when many changed.
func (h *leaseHeap[L]) order() {
	if len(h.es) < 2 {
		return
	}
	for i := (len(h.es) - 2) / arity; i >= 0; i-- {
		h.down(i)
	}
}

// remove takes out the lease at index i, gives its handle back its state,
// and returns it.
func (h *leaseHeap[L]) remove(i int) L {
	es := h.es
	n := len(es) - 1
	e := es[i]
	if i != n {
		es[i] = es[n]
		h.at[es[i].slot] = int32(i)
	}
	es[n] = leaseEntry{}
	h.es = es[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	h.at[e.slot] = -1
	h.free = append(h.free, e.slot)
	sl := &h.st[e.slot]
	lk := sl.lk
	ls := lk.lease()
	*ls = sl.ls
	ls.slot = 0
	*sl = leaseSlot[L]{}
	return lk
}

// arity is the number of children of an entry: four children's entries
// share a cache line or two, and the heap of 10,000 leases is 7 levels
// deep instead of 14, so that moving a lease from the root to the leaves,
// which the scheduler does to every lease it hands to the renewer, reads
// half as many lines.
const arity = 4

// up moves the entry at index i towards the root while it is due before
// its parent.
func (h *leaseHeap[L]) up(i int) {
	es, e := h.es, h.es[i]
	for i > 0 {
		p := (i - 1) / arity
		if !e.before(es[p]) {
			break
		}
		es[i] = es[p]
		h.at[es[i].slot] = int32(i)
		i = p
	}
	es[i] = e
	h.at[e.slot] = int32(i)
}

// down moves the entry at index i towards the leaves while a child is due
// before it, and reports whether it moved.
func (h *leaseHeap[L]) down(i0 int) bool {
	es := h.es
	i, e, n := i0, es[i0], len(es)
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		for j, end := c+1, min(c+arity, n); j < end; j++ {
			if es[j].before(es[c]) {
				c = j
			}
		}
		if !es[c].before(e) {
			break
		}
		es[i] = es[c]
		h.at[es[i].slot] = int32(i)
		i = c
	}
	if i == i0 {
		return false
	}
	es[i] = e
	h.at[e.slot] = int32(i)
	return true
}
