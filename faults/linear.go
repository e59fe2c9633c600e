package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check reads a run's history as operations on a
// fenced lease lock, one per key, and asks porcupine whether some order of
// them, each placed between its call and its return, is a history the
// lock allows (see leaseModel). An operation whose outcome the worker did
// not learn (a timeout, a lost reply: an error that is not "busy", or a
// worker killed in the call) may have taken effect or not: it may take
// effect at any time from its call to the end of the history, and the
// model follows both.

// linTimeout bounds the search for an order. A history the search cannot
// decide in time is reported as such (Report.Linearizable "unknown"), and
// fails the run.
const linTimeout = time.Minute

// opKind is what an operation of the model does.
type opKind uint8

const (
	opAcquire   opKind = iota // a Lock call: a hold of the key, with its fence
	opRefresh                 // a renewal of the hold's lease by TTL, from its call
	opRelease                 // the hold's release
	opDowngrade               // a write lock that becomes a read lock
	opLost                    // the hold's loss, signalled from the server ("taken")
	opWipe                    // a server that restarted empty: every hold is gone
)

var opNames = [...]string{"acquire", "refresh", "release", "downgrade", "lost", "wipe"}

// linOp is one operation on one key. It is the input of porcupine's
// operation; its output is ok.
type linOp struct {
	kind     opKind
	h        *hold // nil for a wipe
	key      string
	share    string // acquire: how the hold shares the key
	fence    uint64 // acquire: the key's fence
	from, to int64  // call and return; to is the end of the history when the outcome is unknown
	ok       bool   // the outcome was seen: acquired, renewed, released, downgraded, taken from the server
	some     bool   // wipe: one server of several restarted; each hold may have kept a quorum
}

// lease is a hold the model's lock has: who, how it shares the key, and
// how long its lease is sure to last (CLOCK_MONOTONIC; 0: nothing says).
// A ghost is a hold that may or may not be there, which no later
// operation of the history can ask to be there: one whose acquisition or
// release had an unknown outcome. It only binds the others.
type lease struct {
	h     int // hold.n
	share string
	until int64
	ghost bool
}

// leases is the state of one key's lock: the earliest time the next
// operation can take effect at (the operations taken so far took effect
// in order, each within its call and return), the highest fence handed
// out, the holds, and the holds a restart wiped (their release finds the
// key gone, which dlock reports as released).
type leases struct {
	now   int64
	fence uint64
	held  []lease // by hold
	gone  []int   // by hold
}

// leaseModel is the sequential specification of a fenced lease lock of
// one key, for every primitive: a lock, a leadership, each key of a
// LockAll hold at most one holder; a read-write lock, readers or one
// writer; a semaphore, at most limit permits. Every acquisition's fence is
// above every fence handed out before it. A hold ends by its release, by
// a restart that wipes it, or when its lease runs out: no sooner than a
// TTL (less a slack for the server's clock) after the call of its last
// renewal that returned, and at any time if none did (a lease the
// acquisition began may be older than the call: etcd's session). A
// release that returns, a renewal that returns and a downgrade that
// returns say that the hold was still there; a loss the server signalled
// says that it was not.
type leaseModel struct {
	ttl   int64 // the lease a renewal gives, less the slack
	limit int   // a semaphore's permits
	names []string
	t0    int64 // the history's start, for descriptions
}

// step returns the states the lock can be in after o, from s.
func (m *leaseModel) step(s leases, o *linOp) []leases {
	t := max(s.now, o.from)
	if t > o.to {
		return nil
	}
	at := s
	at.now = t
	i := slices.IndexFunc(s.held, func(l lease) bool { return l.h == o.h.n0() })
	switch o.kind {
	case opAcquire:
		if o.ok {
			return m.acquire(at, o, o.fence, false)
		}
		// Not taken, or taken with a fence of its own.
		return append([]leases{at}, m.acquire(at, o, s.fence+1, true)...)
	case opRefresh:
		if !o.ok {
			// A renewal may have run without its reply: a longer lease
			// binds no one more than the one the model has.
			return []leases{at}
		}
		if i < 0 {
			return nil
		}
		n := at.clone()
		n.held[i].until = max(n.held[i].until, o.from+m.ttl)
		return []leases{n}
	case opRelease:
		g := slices.Index(s.gone, o.h.n)
		n := at.clone()
		switch {
		case i >= 0:
			n.held = slices.Delete(n.held, i, i+1)
		case g >= 0:
			n.gone = slices.Delete(n.gone, g, g+1)
		case o.ok:
			return nil // released what the lock did not have
		}
		if o.ok || i < 0 {
			return []leases{n}
		}
		kept := at.clone()
		kept.held[i].ghost = true
		return []leases{kept, n}
	case opDowngrade:
		ok := i >= 0 && s.held[i].share == exclusive
		var n leases
		if ok {
			n = at.clone()
			n.held[i].share = shared
		}
		switch {
		case o.ok && ok:
			return []leases{n}
		case o.ok:
			return nil
		case ok:
			return []leases{at, n}
		}
		return []leases{at}
	case opLost:
		if !o.ok || i < 0 {
			return []leases{at}
		}
		// The server no longer had the hold: its lease ran out.
		n, ok := m.expire(at, []int{i}, o.to)
		if !ok {
			return nil
		}
		return []leases{n}
	case opWipe:
		var out []leases
		for _, lost := range subsets(len(s.held), !o.some) {
			n := at.clone()
			n.held = nil
			for j, l := range at.held {
				if lost&(1<<j) != 0 {
					n.gone = append(n.gone, l.h)
				} else {
					n.held = append(n.held, l)
				}
			}
			slices.Sort(n.gone)
			out = append(out, n)
		}
		return out
	}
	return nil
}

// acquire returns the states after o took the key with fence: the holds
// it cannot be beside end first, their leases run out, by o's return.
func (m *leaseModel) acquire(s leases, o *linOp, fence uint64, ghost bool) []leases {
	if fence <= s.fence {
		return nil
	}
	var clash, permits []int
	for i, l := range s.held {
		switch {
		case o.share == exclusive || l.share == exclusive:
			clash = append(clash, i)
		case o.share == permit && l.share == permit:
			permits = append(permits, i)
		}
	}
	var out []leases
	add := func(ended []int) {
		n, ok := m.expire(s, ended, o.to)
		if !ok {
			return
		}
		n.fence = fence
		n.held = append(n.held, lease{h: o.h.n, share: o.share, ghost: ghost})
		slices.SortFunc(n.held, func(a, b lease) int { return a.h - b.h })
		out = append(out, n)
	}
	if extra := len(permits) - m.limit + 1; extra > 0 {
		for _, c := range combinations(permits, extra) {
			add(append(slices.Clone(clash), c...))
		}
	} else {
		add(clash)
	}
	return out
}

// expire ends the holds at indexes ended of s.held, their leases run out
// by the time by: it fails when one of them is sure to last longer.
func (m *leaseModel) expire(s leases, ended []int, by int64) (leases, bool) {
	n := s.clone()
	for _, i := range ended {
		n.now = max(n.now, s.held[i].until)
	}
	if n.now > by {
		return leases{}, false
	}
	slices.Sort(ended)
	for j := len(ended) - 1; j >= 0; j-- {
		n.held = slices.Delete(n.held, ended[j], ended[j]+1)
	}
	return n, true
}

// subsets returns, as bit sets, the subsets of n holds a restart may
// wipe: all of them, or, when only some may be gone, any of them.
func subsets(n int, all bool) []uint64 {
	if all || n > 16 {
		return []uint64{1<<n - 1}
	}
	var out []uint64
	for set := range uint64(1) << n {
		out = append(out, set)
	}
	return out
}

// combinations returns every subset of k elements of xs.
func combinations(xs []int, k int) [][]int {
	if k == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for i := 0; i+k <= len(xs); i++ {
		for _, rest := range combinations(xs[i+1:], k-1) {
			out = append(out, append([]int{xs[i]}, rest...))
		}
	}
	return out
}

func (s leases) clone() leases {
	s.held = slices.Clone(s.held)
	s.gone = slices.Clone(s.gone)
	return s
}

func (s leases) equal(o leases) bool {
	return s.now == o.now && s.fence == o.fence && slices.Equal(s.held, o.held) && slices.Equal(s.gone, o.gone)
}

// dominates reports whether every history that can go on from o can go
// on from s: s is no later and has handed out no higher fence; o's holds
// are s's, but for ghosts (they bind the others, and nothing asks for
// them); and s's holds that o does not have can run out by o's time.
func (s leases) dominates(o leases) bool {
	if s.now > o.now || s.fence > o.fence || !slices.Equal(s.gone, o.gone) {
		return false
	}
	i, j := 0, 0
	for i < len(s.held) || j < len(o.held) {
		switch {
		case j == len(o.held) || i < len(s.held) && s.held[i].h < o.held[j].h:
			if s.held[i].until > o.now {
				return false
			}
			i++
		case i == len(s.held) || o.held[j].h < s.held[i].h:
			if !o.held[j].ghost {
				return false
			}
			j++
		default:
			a, b := s.held[i], o.held[j]
			if a.share != b.share || a.until > b.until || a.ghost != b.ghost {
				return false
			}
			i++
			j++
		}
	}
	return true
}

func (s leases) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(x uint64) { h = (h ^ x) * 1099511628211 }
	mix(uint64(s.now))
	mix(s.fence)
	for _, l := range s.held {
		mix(uint64(l.h))
		mix(uint64(l.until))
		mix(uint64(len(l.share)) + uint64(l.share[0]))
	}
	for _, g := range s.gone {
		mix(uint64(g) + 1<<40)
	}
	return h
}

// n0 is the hold's place in the history, -1 for none.
func (h *hold) n0() int {
	if h == nil {
		return -1
	}
	return h.n
}

// porcupine returns the model as porcupine's, partitioned by key. Its
// states are sets of the lock's states: an operation with an unknown
// outcome leads to each state it may have led to. A state that another of
// the set dominates is dropped: what could follow it can follow the
// other.
func (m *leaseModel) porcupine() porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, op := range ops {
				k := op.Input.(*linOp).key
				byKey[k] = append(byKey[k], op)
			}
			var parts [][]porcupine.Operation
			for _, k := range sortedKeys(byKey) {
				parts = append(parts, byKey[k])
			}
			return parts
		},
		Init: func() any { return []leases{{}} },
		Step: func(state, input, _ any) (bool, any) {
			var next []leases
			for _, s := range state.([]leases) {
				next = append(next, m.step(s, input.(*linOp))...)
			}
			next = prune(next)
			return len(next) > 0, next
		},
		Equal: func(a, b any) bool {
			x, y := a.([]leases), b.([]leases)
			return len(x) == len(y) && !slices.ContainsFunc(x, func(s leases) bool {
				return !slices.ContainsFunc(y, s.equal)
			})
		},
		Hash: func(state any) uint64 {
			var h uint64
			for _, s := range state.([]leases) {
				h ^= s.hash()
			}
			return h
		},
		DescribeOperation: func(input, _ any) string { return m.describeOp(input.(*linOp)) },
		DescribeState: func(state any) string {
			var ds []string
			for _, s := range state.([]leases) {
				ds = append(ds, m.describeState(s))
			}
			return strings.Join(ds, " or ")
		},
	}
}

// prune drops the states that another of ss dominates (of two that
// dominate each other, the later).
func prune(ss []leases) []leases {
	var out []leases
	for _, s := range ss {
		if slices.ContainsFunc(out, func(o leases) bool { return o.dominates(s) }) {
			continue
		}
		out = slices.DeleteFunc(out, s.dominates)
		out = append(out, s)
	}
	return out
}

func (m *leaseModel) describeOp(o *linOp) string {
	var b strings.Builder
	who := "server"
	if o.h != nil {
		who = o.h.id
	}
	fmt.Fprintf(&b, "%s %s %s", who, opNames[o.kind], o.key)
	if o.kind == opAcquire {
		fmt.Fprintf(&b, " (%s)", shareNames[o.share])
		if o.ok {
			fmt.Fprintf(&b, " fence %d", o.fence)
		}
	}
	switch {
	case o.kind == opWipe:
	case o.ok && o.kind == opLost:
		b.WriteString(": the server no longer had it")
	case o.ok:
		b.WriteString(": ok")
	case o.kind == opLost:
		b.WriteString(": lease deadline passed")
	default:
		b.WriteString(": outcome unknown")
	}
	return b.String()
}

var shareNames = map[string]string{exclusive: "exclusive", shared: "shared", permit: "permit"}

func (m *leaseModel) describeState(s leases) string {
	var parts []string
	for _, l := range s.held {
		p := m.names[l.h] + " " + shareNames[l.share]
		if l.ghost {
			p += " (maybe)"
		}
		if l.until != 0 {
			p += fmt.Sprintf(" until %+.3fs", float64(l.until-m.t0)/1e9)
		}
		parts = append(parts, p)
	}
	var gone []string
	for _, g := range s.gone {
		gone = append(gone, m.names[g])
	}
	d := fmt.Sprintf("{fence %d; held by [%s]", s.fence, strings.Join(parts, ", "))
	if len(gone) > 0 {
		d += fmt.Sprintf("; wiped [%s]", strings.Join(gone, ", "))
	}
	return d + "}"
}
