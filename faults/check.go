package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/postgreslock"
)

// Report is what the checker found in one run's history.
type Report struct {
	Config   Config
	Schedule []fault

	Attempts int // Lock calls
	Holds    int // acquisitions
	Writes   int // writes the store received
	Overlaps int // pairs of holds whose critical sections overlapped in time beyond the primitive's rule

	Unsafe      int // (a) pairs of holds that broke the rule in the store's accepted writes, or while both leases were valid
	Fenced      int // (b) writes the store refused for a stale fence
	Regressions int // (c) fences not above an earlier, ended acquisition's
	Stuck       int // (d) Lock calls longer than wait + TTL, outside pauses
	LateLoss    int // (e) losses signalled after another hold began

	// Linearizable is the linearizability check's verdict on the history
	// (see leaseModel): "yes", "no", or "unknown" when the search ran out
	// of time; Ops counts the operations it read.
	Linearizable string
	Ops          int
	Impasses     []string // where the search stopped, a key each, with the history around it
	lin          linCheck // what porcupine found, for the visualisation
	writes       []write  // the store's, for the artifacts

	// Stalled is how long the machine did not run the run's processes
	// (each worker's stalls, and those of the harness and the etcd
	// servers, counted once each): the load it ran under.
	Stalled time.Duration

	Violations []string // the first few, with the history around them
}

// OK reports whether the run kept the properties every safe run must:
// no unsafe interleaving, no fence regression, no stuck call, and a
// linearizable history.
func (r *Report) OK() bool {
	return r.Unsafe == 0 && r.Regressions == 0 && r.Stuck == 0 && r.Linearizable == "yes"
}

// Row is the report as one line of the safety table.
func (r *Report) Row() string {
	backend := r.Config.Backend
	if r.Config.Members > 1 {
		backend += fmt.Sprintf(", %d members", r.Config.Members)
	}
	if r.Config.CLI != "" {
		backend += ", through dlock run"
	}
	switch {
	case r.Config.Backend == "sentinel" && r.Config.NoAck:
		backend += ", without acknowledgement"
	case r.Config.Backend == "sentinel":
		backend += ", WithReplicaAck"
	case r.Config.Backend == "cluster":
		backend += ", 2 masters and 2 replicas"
	}
	switch p := r.Config.Primitive; p {
	case PrimSemaphore:
		backend += fmt.Sprintf(", semaphore of %d", r.Config.Limit)
	case PrimElection, PrimRunOnce, PrimRWLock, PrimMulti:
		backend += ", " + p
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s |", backend, strings.Join(r.Config.Faults, ", "),
		r.Holds, r.Overlaps, r.Unsafe, r.Fenced, r.Regressions, r.Stuck, r.LateLoss, r.Linearizable)
}

// String prints the report: the figures, and on a failure the seed, the
// schedule and the history around each violation.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend %s, %s, %d workers, faults %v, seed %d: %d Lock calls, %d holds, %d writes, %d overlaps\n",
		r.Config.Backend, r.Config.Primitive, r.Config.Workers, r.Config.Faults, r.Config.Seed, r.Attempts, r.Holds, r.Writes, r.Overlaps)
	fmt.Fprintf(&b, "(a) unsafe %d  (b) fenced %d  (c) regressions %d  (d) stuck %d  (e) late loss %d  (stalled %v)\n",
		r.Unsafe, r.Fenced, r.Regressions, r.Stuck, r.LateLoss, r.Stalled.Round(time.Millisecond))
	fmt.Fprintf(&b, "linearizable: %s (%d operations)\n", r.Linearizable, r.Ops)
	fmt.Fprintf(&b, "schedule (replay with seed %d):\n", r.Config.Seed)
	for _, f := range r.Schedule {
		fmt.Fprintf(&b, "  %s on %s for %v\n", f.Kind, f.Target, time.Duration(f.End-f.At).Round(time.Millisecond))
	}
	for _, v := range r.Violations {
		b.WriteString(v)
	}
	for _, v := range r.Impasses {
		b.WriteString(v)
	}
	return b.String()
}

// hold is one Lock call and what followed, rebuilt from the events.
type hold struct {
	id, incarnation  string // "<worker>.<incarnation>.<seq>", "<worker>.<incarnation>"
	worker           int
	start, acq, fail int64
	kind             string            // exclusive, shared or permit
	keys             map[string]uint64 // each key held, with its fence
	asked            []string          // the keys its Lock call asked for
	busy             bool              // the Lock call failed for a busy lock
	down             int64             // when a write lock that became a read lock called Downgrade
	downs            []call            // its Downgrade calls
	refreshes        []call            // its renewals
	done             int64
	lost             bool
	taken            bool // the loss came from the server
	rel, relok       int64
	relErr           bool  // the release returned an error
	end              int64 // when the critical section ended, as far as anyone can tell
	n                int   // its place in the history, for the linearizability check
}

// call is a call a hold made, from its start to its return, and whether
// it returned without an error.
type call struct {
	from, to int64
	ok       bool
}

// readHistory reads every worker's events, in time order.
func readHistory(dir string) ([]event, error) {
	files, err := filepath.Glob(filepath.Join(dir, "worker-*.jsonl"))
	if err != nil {
		return nil, err
	}
	stalls, err := filepath.Glob(filepath.Join(dir, "stall-*.jsonl"))
	if err != nil {
		return nil, err
	}
	files = append(files, stalls...)
	var all []event
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil { // a line cut by a kill is skipped
				all = append(all, e)
			}
		}
		f.Close()
	}
	slices.SortStableFunc(all, func(a, b event) int { return cmpInt(a.T, b.T) })
	return all, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// history is what a run leaves for the checker.
type history struct {
	events []event            // every worker's, in time order
	writes []write            // the store's, in its order
	sched  []fault            // the faults thrown
	kills  map[string]int64   // incarnation -> when the schedule killed it
	pauses map[int][][2]int64 // worker -> when it was paused, cut off or slowed down
	hung   map[string]bool    // incarnations killed at the end, still running
}

// record adds a Downgrade or renewal call of h: its start (End 0), an
// outcome unknown until its return follows, with the same start.
func (h *hold) record(e event) {
	calls := &h.refreshes
	if e.E == "down" {
		calls = &h.downs
	}
	i := slices.IndexFunc(*calls, func(c call) bool { return c.from == e.T && c.to == 0 })
	if i < 0 {
		*calls = append(*calls, call{from: e.T})
		i = len(*calls) - 1
	}
	if e.End == 0 {
		return
	}
	(*calls)[i] = call{e.T, e.End, e.Err == ""}
	if e.E == "down" && e.Err == "" {
		h.down = e.T
	}
}

// check rebuilds the holds from the events and checks them against the
// store's writes, rule by rule.
func check(cfg Config, hi history) *Report {
	cfg.defaults()
	c := rebuild(cfg, hi)
	c.overlaps()
	c.storeOrder()
	c.realTime()
	c.runOnce()
	c.fences()
	c.stuck()
	c.linearizable()
	return c.r
}

// checking is one check: the history, the holds rebuilt from its events,
// and the report that the rules fill in.
type checking struct {
	cfg      Config
	hi       history
	events   []event
	r        *Report
	holds    map[string]*hold
	order    []*hold            // every hold, in the order of its first event
	acquired []*hold            // the holds that were acquired, by acquisition
	stalls   map[int][][2]int64 // worker (-1: every worker) -> its stalls
	last     int64              // the time of the last event
}

// rebuild rebuilds the holds from the events of hi.
func rebuild(cfg Config, hi history) *checking {
	events := hi.events
	c := &checking{cfg: cfg, hi: hi, events: events, holds: map[string]*hold{}, stalls: map[int][][2]int64{},
		r: &Report{Config: cfg, Writes: len(hi.writes), Schedule: hi.sched, writes: hi.writes}}
	r, holds, stalls := c.r, c.holds, c.stalls
	last := int64(0)
	for _, e := range events {
		if e.E == "stall" {
			stalls[e.Worker] = append(stalls[e.Worker], [2]int64{e.T, e.End})
			continue
		}
		last = max(last, e.T)
		h := holds[e.Hold]
		if h == nil {
			h = &hold{id: e.Hold, worker: e.Worker, incarnation: e.Hold[:strings.LastIndexByte(e.Hold, '.')], n: len(c.order)}
			holds[e.Hold] = h
			c.order = append(c.order, h)
		}
		switch e.E {
		case "start":
			h.start, h.kind = e.T, e.Kind
			for k := range e.Keys {
				h.asked = append(h.asked, k)
			}
			slices.Sort(h.asked)
		case "acq":
			h.acq, h.kind, h.keys = e.T, e.Kind, e.Keys
		case "fail":
			h.fail, h.busy = e.T, e.Busy
		case "down", "refresh":
			h.record(e)
		case "done":
			h.done, h.lost, h.taken = e.T, e.Lost, e.Taken
		case "rel":
			h.rel = e.T
		case "relok":
			h.relok, h.relErr = e.T, e.Err != ""
		}
	}
	for _, ps := range stalls {
		r.Stalled += time.Duration(stalledBetween(ps, 0, 1<<62))
	}
	for _, h := range c.order {
		if h.start != 0 {
			r.Attempts++
		}
		if h.acq == 0 {
			continue
		}
		// The critical section ends at the release's start; a hold whose
		// worker was killed ends at the kill; one whose CMD dlock run
		// stopped, at the stop; one still open ends with the run.
		switch {
		case h.rel != 0:
			h.end = h.rel
		case hi.kills[h.incarnation] != 0:
			h.end = hi.kills[h.incarnation]
		case h.lost && h.done != 0:
			h.end = h.done // dlock run stopped its CMD
		default:
			h.end = last
		}
		c.acquired = append(c.acquired, h)
	}
	r.Holds = len(c.acquired)
	slices.SortFunc(c.acquired, func(a, b *hold) int { return cmpInt(a.acq, b.acq) })
	c.last = last
	return c
}

// overlaps counts the overlaps in real time of critical sections the
// primitive should have kept apart, and the late loss signals.
func (c *checking) overlaps() {
	r, acquired := c.r, c.acquired
	var uses []use
	for _, h := range acquired {
		uses = append(uses, h.uses(h.end)...)
	}
	cs := clashes(uses, c.cfg.Limit)
	r.Overlaps = pairs(cs)
	for _, a := range acquired {
		if !a.lost {
			continue
		}
		for _, cl := range cs {
			if cl.u.from < a.done && slices.ContainsFunc(cl.with, func(o use) bool { return o.h == a }) {
				r.LateLoss++ // the honest cost of a pause, not a violation
				break
			}
		}
	}
}

// storeOrder checks rule (a) in the store's order: the accepted writes of
// the holds must keep the primitive's rule: a hold that writes between two
// accepted writes of an exclusive hold shared the key with it; a permit
// that writes while limit others are between their first and last
// accepted writes is one too many.
func (c *checking) storeOrder() {
	r, hi := c.r, c.hi
	for _, w := range hi.writes {
		if !w.Accepted {
			r.Fenced++
		}
	}
	cs := clashes(storeUses(hi.writes, c.holds), c.cfg.Limit)
	r.Unsafe = pairs(cs)
	for _, cl := range cs {
		r.violation(c.events, hi.writes[cl.u.from].At, "(a) %s wrote %s in the store between writes of %s", cl.u.h.id, cl.u.key, ids(cl.with))
	}
}

// realTime checks rule (a) in real time: the holds whose leases were
// valid from the return of their Lock call to the start of their release
// must keep the rule too: those whose release succeeded, whose worker no
// fault touched meanwhile and whose server kept its data. A hold through
// dlock run is left out: its release's outcome does not reach the worker.
func (c *checking) realTime() {
	if c.cfg.CLI != "" {
		return
	}
	r := c.r
	var uses []use
	for _, h := range c.acquired {
		if h.valid(c.cfg, c.hi) {
			uses = append(uses, h.uses(h.rel)...)
		}
	}
	cs := clashes(uses, c.cfg.Limit)
	r.Unsafe += pairs(cs)
	for _, cl := range cs {
		r.violation(c.events, cl.u.from, "(a) %s took %s while %s held it with a valid lease", cl.u.h.id, cl.u.key, ids(cl.with))
	}
}

// runOnce checks that a run of RunOnce keeps its key for its hold from
// its call, whatever becomes of its worker: the next run is granted no
// earlier, unless a server lost its data meanwhile.
func (c *checking) runOnce() {
	cfg, r, acquired := c.cfg, c.r, c.acquired
	if cfg.Primitive != PrimRunOnce {
		return
	}
	for i := 1; i < len(acquired); i++ {
		a, b := acquired[i-1], acquired[i]
		if b.acq-a.start >= int64(runHold(cfg.TTL)-leaseSlack(runHold(cfg.TTL))) || wiped(cfg, c.hi.sched, a.start, b.acq) {
			continue
		}
		r.Unsafe++
		r.violation(c.events, b.acq, "(a) run %s began %v after the call of run %s, within its hold of %v", b.id,
			time.Duration(b.acq-a.start).Round(time.Millisecond), a.id, runHold(cfg.TTL))
	}
}

// fences checks rule (c): a fence must be above every fence of an
// acquisition of the same key whose release completed before this one's
// Lock call began.
func (c *checking) fences() {
	r, acquired := c.r, c.acquired
	byRelease := slices.Clone(acquired)
	slices.SortFunc(byRelease, func(a, b *hold) int { return cmpInt(a.relok, b.relok) })
	for _, b := range acquired {
		for k, f := range b.keys {
			var top *hold
			for _, a := range byRelease {
				if a.relok == 0 {
					continue
				}
				if a.relok >= b.start {
					break
				}
				if _, ok := a.keys[k]; ok && a != b && (top == nil || a.keys[k] > top.keys[k]) {
					top = a
				}
			}
			if top != nil && f <= top.keys[k] {
				r.Regressions++
				r.violation(c.events, b.acq, "(c) %s got fence %d of %s, not above %d of %s, released before it asked", b.id, f, k, top.keys[k], top.id)
			}
		}
	}
}

// stuck checks rule (d): a Lock call returns within its wait, plus the
// TTL and a margin for a slow server, unless its worker was paused, cut
// off or slowed down meanwhile (an attempt in flight is not cut short by
// the wait); and every worker stops by itself at the end of the run. The
// times the machine did not run the worker, the harness between it and
// the servers, or the etcd servers (stalls) do not count. On etcd and
// PostgreSQL, a call's last request may take the driver's RequestTimeout
// (on etcd, a call whose wait ran out takes its place in line back; an
// isolated leader answers nothing meanwhile).
func (c *checking) stuck() {
	cfg, r, hi, order, stalls := c.cfg, c.r, c.hi, c.order, c.stalls
	after := cfg.TTL
	switch cfg.Backend {
	case "etcd":
		after = max(after, etcdlock.RequestTimeout)
	case "postgres":
		after = max(after, postgreslock.RequestTimeout)
	}
	limit := int64(cfg.Wait + after + 2*time.Second)
	if cfg.CLI != "" {
		// A call of dlock run is the command's: its start, its connection
		// (a PING) and its Locker's close, each round trip with the
		// client's own timeouts, around the wait.
		limit += int64(10 * time.Second)
	}
	for _, h := range order {
		end := max(h.acq, h.fail)
		if h.start == 0 || end == 0 || end-h.start <= limit || pausedBetween(hi.pauses[h.worker], h.start, end) {
			continue
		}
		stalled := stalledBetween(append(slices.Clip(stalls[h.worker]), stalls[-1]...), h.start, end)
		if end-h.start-stalled <= limit {
			continue
		}
		r.Stuck++
		r.violation(c.events, h.start, "(d) %s waited %v in Lock (%v of it stalled)", h.id, time.Duration(end-h.start), time.Duration(stalled))
	}
	for _, h := range order {
		if hi.hung[h.incarnation] && !slices.ContainsFunc(order, func(o *hold) bool { return o.incarnation == h.incarnation && o.start > h.start }) {
			r.Stuck++
			r.violation(c.events, max(h.start, h.acq, h.rel), "(d) worker %d did not stop by itself: hold %s never ended", h.worker, h.id)
		}
	}
}

// linearizable checks the history as operations on a fenced lease lock:
// some order of them, each within its call and return, must be one the
// lock allows.
func (c *checking) linearizable() {
	r, events, last := c.r, c.events, c.last
	first := last
	if len(events) > 0 {
		first = events[0].T
	}
	lh := linearOps(c.cfg, c.hi, c.order, first, last)
	r.Ops = len(lh.ops)
	r.Linearizable, r.lin.model, r.lin.info = lh.check()
	r.lin.ops = lh.ops
	if r.Linearizable == "no" {
		for _, im := range impasses(r.lin.model, r.lin.info, lh.ops) {
			at := last
			for _, o := range im.next {
				at = min(at, o.from)
			}
			r.Impasses = append(r.Impasses, r.around(events, at, "%s", im))
		}
	}
}

// linCheck is what the linearizability check found.
type linCheck struct {
	model porcupine.Model
	info  porcupine.LinearizationInfo
	ops   []porcupine.Operation
}

// uses are h's uses of its keys from its acquisition to end: a write lock
// that became a read lock is exclusive until it called Downgrade, and
// shared from then on.
func (h *hold) uses(end int64) []use {
	var us []use
	for k := range h.keys {
		if h.down != 0 && h.down < end {
			us = append(us, use{h, k, exclusive, h.acq, h.down}, use{h, k, shared, h.down, end})
		} else {
			us = append(us, use{h, k, h.kind, h.acq, end})
		}
	}
	return us
}

// valid reports whether h's lease was valid from the return of its Lock
// call to the start of its release: the release succeeded, the lease was
// not lost, no fault touched h's worker meanwhile and no server restarted
// empty.
func (h *hold) valid(cfg Config, hi history) bool {
	if h.rel == 0 || h.relok == 0 || h.relErr || h.lost || pausedBetween(hi.pauses[h.worker], h.acq, h.rel) {
		return false
	}
	return !wiped(cfg, hi.sched, h.acq, h.rel)
}

// wiped reports whether a fault of sched may have cost the lock store its
// data between from and to: a server restarted empty at once, or one
// redis-server killed (Redlock's masters come back after its restart
// delay, when every lease they had has run out; PostgreSQL comes back
// with its data).
func wiped(cfg Config, sched []fault, from, to int64) bool {
	for _, f := range sched {
		if f.At < to && f.End > from && (f.Kind == RestartServer || f.Kind == KillServer && cfg.Backend == "redis") {
			return true
		}
	}
	return false
}

// use is a hold's use of one key over [from, to): in time, or in
// positions of the store's writes.
type use struct {
	h        *hold
	key      string
	kind     string // exclusive, shared or permit
	from, to int64
}

// clash is a use that began while the uses in with had its key in a way
// the primitive forbids.
type clash struct {
	u    use
	with []use
}

// clashes finds, key by key, the uses that began beside more than the
// primitive allows: an exclusive use beside a use of another hold, a
// shared use beside an exclusive one, a permit beside limit others.
func clashes(uses []use, limit int) []clash {
	slices.SortStableFunc(uses, func(a, b use) int { return cmpInt(a.from, b.from) })
	open := map[string][]use{} // key -> the uses begun and not ended
	var cs []clash
	for _, u := range uses {
		var excl, permits []use
		live := open[u.key][:0]
		for _, o := range open[u.key] {
			if o.to <= u.from {
				continue
			}
			live = append(live, o)
			switch {
			case o.h == u.h:
			case u.kind == exclusive || o.kind == exclusive:
				excl = append(excl, o)
			case u.kind == permit && o.kind == permit:
				permits = append(permits, o)
			}
		}
		open[u.key] = append(live, u)
		if len(permits) >= limit {
			excl = append(excl, permits...)
		}
		if len(excl) > 0 {
			cs = append(cs, clash{u, excl})
		}
	}
	return cs
}

// pairs counts the pairs of holds that clashed.
func pairs(cs []clash) int {
	seen := map[[2]*hold]bool{}
	for _, c := range cs {
		for _, o := range c.with {
			seen[[2]*hold{o.h, c.u.h}] = true
		}
	}
	return len(seen)
}

func ids(us []use) string {
	var s []string
	for _, u := range us {
		s = append(s, u.h.id)
	}
	return strings.Join(s, ", ")
}

// storeUses are the holds' uses of the keys in the store's order: from
// the position of a hold's first accepted write to a key to that of its
// last. A write lock that became a read lock is exclusive up to its last
// exclusive write, shared after it.
func storeUses(writes []write, holds map[string]*hold) []use {
	type span struct {
		h                  *hold
		key, kind          string
		first, last, lastX int64
	}
	var spans []*span
	byHold := map[[2]string]*span{}
	for i, w := range writes {
		if !w.Accepted {
			continue
		}
		sp := byHold[[2]string{w.Hold, w.Key}]
		if sp == nil {
			h := holds[w.Hold]
			if h == nil { // its acquisition's line was cut by a kill
				h = &hold{id: w.Hold}
				holds[w.Hold] = h
			}
			sp = &span{h: h, key: w.Key, kind: w.Kind, first: int64(i), lastX: -1}
			byHold[[2]string{w.Hold, w.Key}] = sp
			spans = append(spans, sp)
		}
		sp.last = int64(i)
		if w.Kind == exclusive {
			sp.lastX = int64(i)
		} else if sp.kind == exclusive {
			sp.kind = w.Kind
		}
	}
	var us []use
	for _, sp := range spans {
		switch {
		case sp.lastX < 0:
			us = append(us, use{sp.h, sp.key, sp.kind, sp.first, sp.last + 1})
		case sp.lastX == sp.last:
			us = append(us, use{sp.h, sp.key, exclusive, sp.first, sp.last + 1})
		default:
			us = append(us, use{sp.h, sp.key, exclusive, sp.first, sp.lastX + 1}, use{sp.h, sp.key, sp.kind, sp.lastX + 1, sp.last + 1})
		}
	}
	return us
}

func pausedBetween(ps [][2]int64, from, to int64) bool {
	for _, p := range ps {
		if p[0] < to && p[1] > from {
			return true
		}
	}
	return false
}

// violation records a violation with the events within a second of at.
func (r *Report) violation(events []event, at int64, format string, args ...any) {
	if len(r.Violations) >= 5 {
		return
	}
	r.Violations = append(r.Violations, r.around(events, at, format, args...))
}

// around describes a violation with the faults and the events around at.
func (r *Report) around(events []event, at int64, format string, args ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "violation: "+format+"\n", args...)
	for _, f := range r.Schedule {
		if f.At-at < int64(10*time.Second) && at-f.End < int64(10*time.Second) {
			fmt.Fprintf(&b, "  %+8.3fs fault %s on %s for %v\n", float64(f.At-at)/1e9, f.Kind, f.Target, time.Duration(f.End-f.At).Round(time.Millisecond))
		}
	}
	for _, e := range events {
		if d := e.T - at; d > -int64(time.Second) && d < int64(time.Second) {
			if e.E == "stall" {
				fmt.Fprintf(&b, "  %+8.3fs stall of %s for %v\n", float64(d)/1e9, stallOwner(e.Worker), time.Duration(e.End-e.T).Round(time.Millisecond))
				continue
			}
			fmt.Fprintf(&b, "  %+8.3fs %-5s %s", float64(d)/1e9, e.E, e.Hold)
			if e.Fence != 0 {
				fmt.Fprintf(&b, " fence %d", e.Fence)
			}
			if e.E == "write" {
				fmt.Fprintf(&b, " accepted %v", e.OK)
			}
			if e.Lost {
				b.WriteString(" lost")
			}
			if e.Taken {
				b.WriteString(" (the server no longer had it)")
			}
			if e.Err != "" {
				fmt.Fprintf(&b, " %s", e.Err)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// stallOwner names the process whose stall a stall event of worker w is.
func stallOwner(w int) string {
	if w < 0 {
		return "a server or the harness"
	}
	return fmt.Sprintf("worker %d", w)
}
