package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// linHistory is a run's history as the linearizability check reads it.
type linHistory struct {
	model *leaseModel
	ops   []porcupine.Operation
	end   int64 // the end of the history: where an unknown outcome's return is
}

// linearOps turns the holds of a run (in the order of their first event)
// into operations of the lease model. A hold that a Lock call did not
// acquire for a busy lock did nothing; one whose call failed otherwise,
// or whose worker was killed in it, may have acquired the keys it asked
// for. A hold through dlock run is released by the command, whose outcome
// the worker does not see.
//
// An operation whose outcome is unknown may take effect at any time
// after its call, which porcupine's search pays for dearly (it may place
// it anywhere). Its return is the end of the history only where that
// matters. An acquisition or a renewal that may have taken effect leads
// to states the one where it did not dominates (see leases.dominates): it
// keeps its own return. A release that may have taken effect ends a hold
// that the end of its lease would end as well: its return is the end of
// the lease its renewals gave it, when that is later than the call's.
func linearOps(cfg Config, hi history, order []*hold, first, last int64) linHistory {
	m := &leaseModel{ttl: int64(cfg.TTL - leaseSlack(cfg.TTL)), limit: cfg.Limit, t0: first}
	end := last + 1
	lh := linHistory{model: m, end: end}
	keys := map[string]bool{}
	add := func(o *linOp, client int) {
		keys[o.key] = true
		lh.ops = append(lh.ops, porcupine.Operation{ClientId: client, Input: o, Call: o.from, Output: o.ok, Return: o.to})
	}
	for _, h := range order {
		m.names = append(m.names, h.id)
		if h.start == 0 {
			continue // its Lock call's line was cut by a kill
		}
		switch {
		case h.acq != 0:
			for _, k := range sortedKeys(h.keys) {
				add(&linOp{kind: opAcquire, h: h, key: k, share: h.kind, fence: h.keys[k], from: h.start, to: h.acq, ok: true}, h.worker)
			}
		case h.fail != 0 && h.busy:
			continue
		default:
			to := max(h.start, h.fail) // killed in the call: no return
			for _, k := range h.asked {
				add(&linOp{kind: opAcquire, h: h, key: k, share: h.kind, from: h.start, to: to}, h.worker)
			}
			continue
		}
		each := func(kind opKind, c call) {
			c.to = max(c.to, c.from) // a call whose return was not recorded took no time
			for k := range h.keys {
				add(&linOp{kind: kind, h: h, key: k, from: c.from, to: c.to, ok: c.ok}, h.worker)
			}
		}
		leaseEnd := h.acq
		for _, c := range h.refreshes {
			each(opRefresh, c)
			if c.ok {
				leaseEnd = max(leaseEnd, c.from+m.ttl)
			}
		}
		for _, c := range h.downs {
			if !c.ok {
				c.to = end
			}
			each(opDowngrade, c)
		}
		if h.lost && h.done != 0 && len(h.keys) == 1 {
			// The server said so at some time between the acquisition
			// and the signal, after the acquisition took effect.
			each(opLost, call{h.acq + 1, h.done, h.taken})
		}
		if h.rel != 0 {
			c := call{h.rel, h.relok, h.relok != 0 && !h.relErr && cfg.CLI == ""}
			if !c.ok {
				c.to = max(c.to, h.rel, leaseEnd)
			}
			each(opRelease, c)
		}
	}
	for _, f := range hi.sched {
		if f.Kind != RestartServer {
			continue
		}
		for _, k := range sortedKeys(keys) {
			add(&linOp{kind: opWipe, key: k, from: f.At, to: f.End, ok: true, some: cfg.Backend == "redlock"}, cfg.Workers)
		}
	}
	return lh
}

// leaseSlack is what the model takes off a lease for the server's clock:
// Redis counts its leases in milliseconds of its own clock.
func leaseSlack(ttl time.Duration) time.Duration { return ttl/100 + 5*time.Millisecond }

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// linearizable checks lh with porcupine, and says "yes", "no" or
// "unknown" (out of time), with what porcupine found.
func (lh linHistory) check() (string, porcupine.Model, porcupine.LinearizationInfo) {
	model := lh.model.porcupine()
	res, info := porcupine.CheckOperationsVerbose(model, lh.ops, linTimeout)
	switch res {
	case porcupine.Ok:
		return "yes", model, info
	case porcupine.Illegal:
		return "no", model, info
	}
	return "unknown", model, info
}

// impasse is where the search for an order of one key's operations
// stopped: the longest order it found, the state it leads to, and the
// operations that no order could take next (those called before the
// first of the left-out operations returned).
type impasse struct {
	key   string
	order []*linOp
	state string
	next  []*linOp
}

// impasses returns an impasse for each key whose history is not
// linearizable.
func impasses(model porcupine.Model, info porcupine.LinearizationInfo, ops []porcupine.Operation) []impasse {
	byKey := map[string][]*linOp{}
	for _, op := range ops {
		o := op.Input.(*linOp)
		byKey[o.key] = append(byKey[o.key], o)
	}
	keys := sortedKeys(byKey) // the model's partitions, in their order
	var out []impasse
	for p, partials := range info.PartialLinearizationsOperations() {
		if p >= len(keys) {
			break
		}
		var longest []porcupine.Operation
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(byKey[keys[p]]) {
			continue // linearizable
		}
		im := impasse{key: keys[p]}
		in := map[*linOp]bool{}
		state := model.Init()
		for _, op := range longest {
			o := op.Input.(*linOp)
			in[o] = true
			im.order = append(im.order, o)
			_, state = model.Step(state, op.Input, op.Output)
		}
		im.state = model.DescribeState(state)
		first := int64(1<<63 - 1)
		for _, o := range byKey[keys[p]] {
			if !in[o] {
				first = min(first, o.to)
			}
		}
		for _, o := range byKey[keys[p]] {
			if !in[o] && o.from <= first {
				im.next = append(im.next, o)
			}
		}
		out = append(out, im)
	}
	return out
}

func (im impasse) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "(lin) %s: no order of its operations is one the lock allows: after %d in order", im.key, len(im.order))
	if n := len(im.order); n > 0 {
		fmt.Fprintf(&b, " (the last %s)", im.order[n-1])
	}
	fmt.Fprintf(&b, ", with the lock at %s, none of these can come next:", im.state)
	for _, o := range im.next {
		fmt.Fprintf(&b, " %s;", o)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// String describes o for a report.
func (o *linOp) String() string {
	who := "a restart"
	if o.h != nil {
		who = o.h.id
	}
	s := fmt.Sprintf("%s's %s", who, opNames[o.kind])
	switch {
	case o.kind == opAcquire && o.ok:
		s += fmt.Sprintf(" (fence %d)", o.fence)
	case o.kind == opLost && o.ok:
		s += " (taken)"
	case o.kind != opWipe && !o.ok:
		s += " (outcome unknown)"
	}
	return s
}
