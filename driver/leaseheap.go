package driver

// leaseHeap orders leases by due time: a binary min-heap whose entries
// carry their due time beside the handle, so that ordering them reads no
// lease. A watchdog of many leases moves each twice per renewal period,
// and a comparison that reads two leases, scattered in memory, cost most
// of its time. An entry's due is its lease's due as Watchdog.at counts
// it, kept equal by every change to the lease's due under the watchdog's
// mutex. Each lease knows its index in the heap (-1 when not there).
type leaseHeap[L Leased] []leaseEntry[L]

type leaseEntry[L Leased] struct {
	due int64 // Watchdog.at of the lease's due
	lk  L
}

// push adds lk, due at due.
func (h *leaseHeap[L]) push(lk L, due int64) {
	*h = append(*h, leaseEntry[L]{due, lk})
	i := len(*h) - 1
	lk.lease().index = i
	h.up(i)
}

// fix sets the due of the lease at index i, and restores the order.
func (h leaseHeap[L]) fix(i int, due int64) {
	h[i].due = due
	if !h.down(i) {
		h.up(i)
	}
}

// remove takes out the lease at index i and returns it.
func (h *leaseHeap[L]) remove(i int) L {
	old := *h
	n := len(old) - 1
	lk := old[i].lk
	if i != n {
		old[i] = old[n]
		old[i].lk.lease().index = i
	}
	old[n] = leaseEntry[L]{}
	*h = old[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	lk.lease().index = -1
	return lk
}

// up moves the entry at index i towards the root while it is due before
// its parent.
func (h leaseHeap[L]) up(i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].due <= e.due {
			break
		}
		h[i] = h[p]
		h[i].lk.lease().index = i
		i = p
	}
	h[i] = e
	e.lk.lease().index = i
}

// down moves the entry at index i towards the leaves while a child is due
// before it, and reports whether it moved.
func (h leaseHeap[L]) down(i0 int) bool {
	i, e, n := i0, h[i0], len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].due < h[c].due {
			c = r
		}
		if e.due <= h[c].due {
			break
		}
		h[i] = h[c]
		h[i].lk.lease().index = i
		i = c
	}
	if i == i0 {
		return false
	}
	h[i] = e
	e.lk.lease().index = i
	return true
}
