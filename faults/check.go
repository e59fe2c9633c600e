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
)

// Report is what the checker found in one run's history.
type Report struct {
	Config   Config
	Schedule []fault

	Attempts int // Lock calls
	Holds    int // acquisitions
	Writes   int // writes the store received
	Overlaps int // pairs of holds whose critical sections overlapped in time

	Unsafe      int // (a) pairs of holds whose accepted writes interleave in the store
	Fenced      int // (b) writes the store refused for a stale fence
	Regressions int // (c) fences not above an earlier, ended acquisition's
	Stuck       int // (d) Lock calls longer than wait + TTL, outside pauses
	LateLoss    int // (e) losses signalled after another hold began

	Violations []string // the first few, with the history around them
}

// OK reports whether the run kept the properties every safe run must:
// no unsafe interleaving, no fence regression, no stuck call.
func (r *Report) OK() bool { return r.Unsafe == 0 && r.Regressions == 0 && r.Stuck == 0 }

// Row is the report as one line of the safety table.
func (r *Report) Row() string {
	backend := r.Config.Backend
	if r.Config.Members > 1 {
		backend += fmt.Sprintf(", %d members", r.Config.Members)
	}
	if r.Config.CLI != "" {
		backend += ", through dlock run"
	}
	if r.Config.Election {
		backend += ", election"
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d |", backend, strings.Join(r.Config.Faults, ", "),
		r.Holds, r.Overlaps, r.Unsafe, r.Fenced, r.Regressions, r.Stuck, r.LateLoss)
}

// String prints the report: the figures, and on a failure the seed, the
// schedule and the history around each violation.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend %s, %d workers, faults %v, seed %d: %d Lock calls, %d holds, %d writes, %d overlaps\n",
		r.Config.Backend, r.Config.Workers, r.Config.Faults, r.Config.Seed, r.Attempts, r.Holds, r.Writes, r.Overlaps)
	fmt.Fprintf(&b, "(a) unsafe %d  (b) fenced %d  (c) regressions %d  (d) stuck %d  (e) late loss %d\n",
		r.Unsafe, r.Fenced, r.Regressions, r.Stuck, r.LateLoss)
	fmt.Fprintf(&b, "schedule (replay with seed %d):\n", r.Config.Seed)
	for _, f := range r.Schedule {
		fmt.Fprintf(&b, "  %s on %s for %v\n", f.Kind, f.Target, time.Duration(f.End-f.At).Round(time.Millisecond))
	}
	for _, v := range r.Violations {
		b.WriteString(v)
	}
	return b.String()
}

// hold is one Lock call and what followed, rebuilt from the events.
type hold struct {
	id, incarnation  string // "<worker>.<incarnation>.<seq>", "<worker>.<incarnation>"
	worker           int
	start, acq, fail int64
	fence            uint64
	done             int64
	lost             bool
	rel, relok       int64
	end              int64 // when the critical section ended, as far as anyone can tell
}

// readHistory reads every worker's events, in time order.
func readHistory(dir string) ([]event, error) {
	files, err := filepath.Glob(filepath.Join(dir, "worker-*.jsonl"))
	if err != nil {
		return nil, err
	}
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

// check rebuilds the holds from the events and checks them against the
// store's writes.
func check(cfg Config, events []event, writes []write, sched []fault, kills map[string]int64, pauses map[int][][2]int64) *Report {
	r := &Report{Config: cfg, Writes: len(writes), Schedule: sched}
	holds := map[string]*hold{}
	var order []*hold
	last := int64(0)
	for _, e := range events {
		last = max(last, e.T)
		h := holds[e.Hold]
		if h == nil {
			h = &hold{id: e.Hold, worker: e.Worker, incarnation: e.Hold[:strings.LastIndexByte(e.Hold, '.')]}
			holds[e.Hold] = h
			order = append(order, h)
		}
		switch e.E {
		case "start":
			h.start = e.T
		case "acq":
			h.acq, h.fence = e.T, e.Fence
		case "fail":
			h.fail = e.T
		case "done":
			h.done, h.lost = e.T, e.Lost
		case "rel":
			h.rel = e.T
		case "relok":
			h.relok = e.T
		}
	}
	var acquired []*hold
	for _, h := range order {
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
		case kills[h.incarnation] != 0:
			h.end = kills[h.incarnation]
		case h.lost && h.done != 0:
			h.end = h.done // dlock run stopped its CMD
		default:
			h.end = last
		}
		acquired = append(acquired, h)
	}
	r.Holds = len(acquired)
	slices.SortFunc(acquired, func(a, b *hold) int { return cmpInt(a.acq, b.acq) })

	// Overlaps in real time, and late loss signals.
	for i, a := range acquired {
		for _, b := range acquired[i+1:] {
			if b.acq >= a.end {
				break
			}
			r.Overlaps++
		}
		if a.lost {
			for _, b := range acquired[i+1:] {
				if b.acq < a.done && b.acq < a.end {
					r.LateLoss++ // the honest cost of a pause, not a violation
					break
				}
			}
		}
	}

	// (a) In the store's order, the accepted writes of one hold must form
	// one run: a hold that writes again after another hold wrote shared
	// the lock with it.
	finished := map[string]bool{}
	current := ""
	for _, w := range writes {
		if !w.Accepted {
			r.Fenced++
			continue
		}
		if w.Hold == current {
			continue
		}
		if finished[w.Hold] {
			r.Unsafe++
			r.violation(events, w.At, "(a) %s wrote (fence %d) after %s had written: their holds overlapped", w.Hold, w.Fence, current)
		}
		if current != "" {
			finished[current] = true
		}
		current = w.Hold
	}

	// (c) A fence must be above every fence of an acquisition whose
	// release completed before this one's Lock call began.
	byRelease := slices.Clone(acquired)
	slices.SortFunc(byRelease, func(a, b *hold) int { return cmpInt(a.relok, b.relok) })
	for _, b := range acquired {
		var top *hold
		for _, a := range byRelease {
			if a.relok == 0 {
				continue
			}
			if a.relok >= b.start {
				break
			}
			if a != b && (top == nil || a.fence > top.fence) {
				top = a
			}
		}
		if top != nil && b.fence <= top.fence {
			r.Regressions++
			r.violation(events, b.acq, "(c) %s got fence %d, not above %d of %s, released before it asked", b.id, b.fence, top.fence, top.id)
		}
	}

	// (d) A Lock call returns within its wait, plus the TTL and a margin
	// for a slow server, unless its worker was paused, cut off or slowed
	// down meanwhile (an attempt in flight is not cut short by the wait).
	limit := int64(cfg.Wait + cfg.TTL + 2*time.Second)
	for _, h := range order {
		end := max(h.acq, h.fail)
		if h.start == 0 || end == 0 || end-h.start <= limit || pausedBetween(pauses[h.worker], h.start, end) {
			continue
		}
		r.Stuck++
		r.violation(events, h.start, "(d) %s waited %v in Lock", h.id, time.Duration(end-h.start))
	}
	return r
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
	var b strings.Builder
	fmt.Fprintf(&b, "violation: "+format+"\n", args...)
	for _, f := range r.Schedule {
		if f.At-at < int64(10*time.Second) && at-f.End < int64(10*time.Second) {
			fmt.Fprintf(&b, "  %+8.3fs fault %s on %s for %v\n", float64(f.At-at)/1e9, f.Kind, f.Target, time.Duration(f.End-f.At).Round(time.Millisecond))
		}
	}
	for _, e := range events {
		if d := e.T - at; d > -int64(time.Second) && d < int64(time.Second) {
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
			if e.Err != "" {
				fmt.Fprintf(&b, " %s", e.Err)
			}
			b.WriteByte('\n')
		}
	}
	r.Violations = append(r.Violations, b.String())
}
