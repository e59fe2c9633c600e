package driver

// leaseHeap orders leases by due time: a binary min-heap whose entries
// carry their due time beside the handle, so that ordering them reads no
// lease. A watchdog of many leases moves each twice per renewal period,
// and a comparison that reads two leases, scattered in memory, cost most
// of its time. An entry's due is its lease's due as Watchdog.at counts
// it, kept equal by every change to the lease's due under the watchdog's
// mutex.
//
// Where each lease sits in the heap is kept in a table of the heap's own
// (at), by slot: a lease knows its slot, and an entry knows its lease's
// slot. A move within the heap then writes to that table, a few bytes a
// lease side by side, and never to the leases it moves, which would touch
// as many scattered leases as the heap has levels.
type leaseHeap[L Leased] struct {
	es   []leaseEntry[L] // the heap
	at   []int32         // at[slot] is the index in es of the lease of that slot
	free []int32         // the slots no lease has
}

type leaseEntry[L Leased] struct {
	due  int64 // Watchdog.at of the lease's due
	slot int32
	lk   L
}

// len returns the number of leases in the heap.
func (h *leaseHeap[L]) len() int { return len(h.es) }

// first returns the lease due first. The heap must not be empty.
func (h *leaseHeap[L]) first() L { return h.es[0].lk }

// index returns where lk is in the heap, or -1 when it is not there.
func (h *leaseHeap[L]) index(lk L) int {
	s := int(lk.lease().slot) - 1
	if s < 0 || s >= len(h.at) {
		return -1
	}
	i := int(h.at[s])
	if i < 0 || i >= len(h.es) || h.es[i].lk != lk {
		return -1
	}
	return i
}

// push adds lk, due at due. lk must not be in the heap.
func (h *leaseHeap[L]) push(lk L, due int64) {
	var s int32
	if n := len(h.free); n > 0 {
		s, h.free = h.free[n-1], h.free[:n-1]
	} else {
		s = int32(len(h.at))
		h.at = append(h.at, 0)
	}
	lk.lease().slot = s + 1
	h.es = append(h.es, leaseEntry[L]{due, s, lk})
	i := len(h.es) - 1
	h.at[s] = int32(i)
	h.up(i)
}

// fix sets the due of the lease at index i, and restores the order.
func (h *leaseHeap[L]) fix(i int, due int64) {
	h.es[i].due = due
	if !h.down(i) {
		h.up(i)
	}
}

// remove takes out the lease at index i and returns it.
func (h *leaseHeap[L]) remove(i int) L {
	es := h.es
	n := len(es) - 1
	e := es[i]
	if i != n {
		es[i] = es[n]
		h.at[es[i].slot] = int32(i)
	}
	es[n] = leaseEntry[L]{}
	h.es = es[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	h.at[e.slot] = -1
	h.free = append(h.free, e.slot)
	e.lk.lease().slot = 0
	return e.lk
}

// up moves the entry at index i towards the root while it is due before
// its parent.
func (h *leaseHeap[L]) up(i int) {
	es, e := h.es, h.es[i]
	for i > 0 {
		p := (i - 1) / 2
		if es[p].due <= e.due {
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
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && es[r].due < es[c].due {
			c = r
		}
		if e.due <= es[c].due {
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
