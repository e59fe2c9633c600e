package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// growthHeading starts part 7's section.
const growthHeading = "## 7. How cost grows"

// The rules of part 7's goals.
const (
	growthFlat = 2.0 // the largest size's per-lock or per-hand-off cost at most this many times the reference's
	growthRef  = 8   // contenders of the reference hand-off cell
)

func (run *growthRun) backends(held bool) []string {
	var out []string
	add := func(b string) {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	if held {
		for _, h := range run.held {
			add(h.backend)
		}
	} else {
		for _, h := range run.hot {
			add(h.backend)
		}
	}
	return out
}

func (run *growthRun) heldOf(backend string) []heldGrowth {
	return where(run.held, func(h heldGrowth) bool { return h.backend == backend })
}

func (run *growthRun) hotOf(backend string) []hotGrowth {
	return where(run.hot, func(h hotGrowth) bool { return h.backend == backend })
}

// where returns the elements of xs that keep accepts, in their order.
func where[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// bytesOf prints a size per lock (negative: less than before the first
// lock, as a GC or a vacuum can leave it).
func bytesOf(v float64) string { return fmt.Sprintf("%.0f B", v) }

// usOr prints µs, or "–" for a figure not measured.
func usOr(v float64, f func(float64) string) string {
	if v < 0 {
		return "–"
	}
	return f(v) + " µs"
}

func (run *growthRun) markdown(p printer) {
	g := run.cfg
	p("%s", growthHeading)
	p("")
	p("The part took %v. Each backend runs on servers of its own, started for it.", run.elapsed.Round(time.Second))
	p("")
	p("**Held locks.** One Locker takes more and more locks from 64 goroutines (`TryLock`, TTL %v, watchdog on, so each lock", g.ttl)
	p("is renewed every %v) and keeps them for a window of %v at each size: Redis up to %s locks (a step that cannot", g.ttl/3, g.window, commas(g.redisMax))
	p("take its locks within %v measures what it reached, and the larger ones are not tried), etcd (one embedded member)", g.acquire)
	p("and PostgreSQL (fsync on) up to %s. For etcd and PostgreSQL, whose renewals are a few requests a tick for", commas(g.otherMax))
	p("all the locks, the window starts once the requests have stayed at that pace for 2s (*settled in*: an etcd hold starts")
	p("watching its key a second after its acquisition). Client CPU is this process's `getrusage` over the window; for etcd it includes")
	p("the server, which runs in this process. Server CPU: Redis `INFO cpu`, PostgreSQL the postmaster and its processes")
	p("(`/proc`). Per lock: CPU in µs per second of holding, divided by the locks held. Server memory per lock: Redis")
	p("`used_memory`, etcd's store in use (`DbSizeInUse`), PostgreSQL `pg_database_size` (dead row versions of renewals")
	p("included), each less its value before the first lock, divided by the locks; client heap likewise (after a GC).")
	p("Commands/s: Redis `total_commands_processed`, etcd the requests the Locker's client sent, PostgreSQL the statements.")
	p("")
	p("![how cost grows](growth-held.svg)")
	p("")
	p("| backend | locks | taken in | settled in | client CPU (cores) | client CPU per lock | server CPU (cores) | server CPU per lock | server memory per lock | client heap per lock | commands/s | lost |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, h := range run.held {
		settled := "not within " + settleLimit.String()
		switch {
		case h.settle == 0:
			settled = "–"
		case h.settle > 0:
			settled = h.settle.Round(time.Millisecond).String()
		}
		srv, srvPer := "–", "–"
		if h.server >= 0 {
			srv, srvPer = fmt.Sprintf("%.3f", h.server.Seconds()/h.window.Seconds()), f2(h.serverPerLock())+" µs/s"
		}
		p("| %s | %s | %v | %s | %.3f | %s µs/s | %s | %s | %s | %s | %s %s | %d |", h.backend, commas(h.locks), h.acquire.Round(time.Millisecond), settled,
			h.clientCores(), f2(h.clientPerLock()), srv, srvPer, bytesOf(h.perLock(float64(h.serverBytes))), bytesOf(h.perLock(float64(h.clientBytes))),
			rate(h.cmdsPerSec()), h.cmdsUnit, h.lost)
	}
	p("")
	p("**One key, more contenders.** %s contenders, each a party of its own, on one key, one cell each of %v, or %v per", joinInts(g.contenders), g.hot, g.hot/50)
	p("contender when longer (%v at %d), so that every contender takes the lock more than once and its first attempt is", g.cell(slices.Max(g.contenders)), slices.Max(g.contenders))
	p("spread over many hand-offs; through part 2's hot-key loop (PostgreSQL: its own section's hand-off loop): hold %v,", run.hold)
	p("release, let another take it.")
	p("Per hand-off: the requests the parties sent (Redis and etcd round trips, PostgreSQL statements: waiting, renewing")
	p("and releasing included), server CPU (Redis `INFO cpu`, summed over the five servers for Redlock; PostgreSQL from")
	p("`/proc`; etcd runs in this process, so its server CPU is in the client's and its Raft writes stand for it), and this")
	p("process's CPU. What each contender does once per cell (its first attempt, joining the line, leaving it when the cell")
	p("ends) is spread over the cell's hand-offs: where a contender gets few hand-offs (the figure in brackets), it weighs.")
	p("What a process does once in its life is not: PostgreSQL's connections, one per contender, and each contender's LISTEN")
	p("session are set up before the cell's clock.")
	p("")
	p("![hand-off cost](growth-handoff.svg)")
	p("")
	p("| backend | contenders | hand-off p50 | hand-offs (per contender) | requests per hand-off | server CPU per hand-off | client CPU per hand-off | Raft writes per hand-off |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, h := range run.hot {
		if h.unfinished || h.handoffs == 0 {
			what := "unfinished"
			if !h.unfinished {
				what = fmt.Sprintf("no hand-off (%d acquisitions)", h.acquisitions)
			}
			p("| %s | %d | %s | – | – | – | – | – |", h.backend, h.n, what)
			continue
		}
		w := "–"
		if h.writes >= 0 {
			w = f2(h.writes)
		}
		p("| %s | %d | %s | %d (%s) | %s %s | %s | %s µs | %s |", h.backend, h.n, ms(h.p50.Seconds()), h.handoffs, f1(float64(h.handoffs)/float64(h.n)), f1(h.requests), h.unit,
			usOr(h.server, f1), f1(h.client), w)
	}
	p("")
	p("**The goals' rules.** *Per-lock cost flat*: for each backend, client CPU per lock at the largest number held at most")
	p("%.0f× its value at 1,000, the same for server CPU where measured, the largest number actually reached, none lost, and", growthFlat)
	p("client plus server CPU at the largest within one core. *Hand-off cost flat in waiters*: for each backend, requests and")
	p("server CPU per hand-off (etcd: this process's CPU, the server's included) at the most contenders at most %.0f× their", growthFlat)
	p("values at %d.", growthRef)
	p("")
	for _, n := range run.notes {
		p("- %s", n)
	}
	if len(run.notes) > 0 {
		p("")
	}
}

func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

// charts are part 7's charts, by file name.
func (run *growthRun) charts() map[string]chart {
	held := chart{title: "Held locks: client CPU per lock (µs per second of holding)", unit: "µs of client CPU per lock per second, log scale", log: true}
	held.series = run.backends(true)
	for _, n := range sizes(run.cfg.redisMax) {
		var row []bar
		found := false
		for _, b := range held.series {
			v := bar{}
			for _, h := range run.heldOf(b) {
				if h.want == n {
					v = bar{med: h.clientPerLock(), label: fmt.Sprintf("%s µs/s · %s locks", f2(h.clientPerLock()), commas(h.locks))}
					found = true
				}
			}
			row = append(row, v)
		}
		if found {
			held.groups = append(held.groups, commas(n)+" locks")
			held.vals = append(held.vals, row)
		}
	}
	hot := chart{title: "One key: requests per hand-off as contenders grow", unit: "requests (statements for PostgreSQL) per hand-off, log scale", log: true}
	hot.series = run.backends(false)
	for _, n := range run.cfg.contenders {
		var row []bar
		for _, b := range hot.series {
			v := bar{}
			for _, h := range run.hotOf(b) {
				if h.n == n && !h.unfinished {
					v = bar{med: h.requests, label: fmt.Sprintf("%s · p50 %s", f1(h.requests), ms(h.p50.Seconds()))}
				}
			}
			row = append(row, v)
		}
		hot.groups = append(hot.groups, fmt.Sprintf("%d contenders", n))
		hot.vals = append(hot.vals, row)
	}
	return map[string]chart{"growth-held.svg": held, "growth-handoff.svg": hot}
}

// goals are part 7's goals, one of each kind per backend.
func (run *growthRun) goals() []goal {
	var gs []goal
	for _, b := range run.backends(true) {
		rows := run.heldOf(b)
		lo, hi := rows[0], rows[len(rows)-1]
		want := run.cfg.otherMax
		if b == backRedis {
			want = run.cfg.redisMax
		}
		ok := hi.locks >= want
		var parts []string
		// compare checks one figure per lock: flat when the largest
		// number's is at most growthFlat times the smallest's. A figure
		// too small to measure at the smallest number cannot be compared.
		compare := func(what string, a, b float64) {
			if b <= 0 {
				parts = append(parts, fmt.Sprintf("%s per lock too small to measure at %s", what, commas(lo.locks)))
				return
			}
			parts = append(parts, fmt.Sprintf("%s per lock %s× at %s against %s", what, f2(a/b), commas(hi.locks), commas(lo.locks)))
			ok = ok && a/b <= growthFlat
		}
		compare("client CPU", hi.clientPerLock(), lo.clientPerLock())
		cores := hi.clientCores()
		if lo.server >= 0 {
			compare("server CPU", hi.serverPerLock(), lo.serverPerLock())
			cores += hi.server.Seconds() / hi.window.Seconds()
		}
		measured := strings.Join(parts, ", ")
		var lost int
		for _, h := range rows {
			lost += h.lost
		}
		measured += fmt.Sprintf("; %.3f cores at %s; %d lost", cores, commas(hi.locks), lost)
		if hi.locks < want {
			measured += fmt.Sprintf("; reached %s of %s", commas(hi.locks), commas(want))
		}
		ok = ok && cores <= 1 && lost == 0
		gs = append(gs, goal{what: fmt.Sprintf("%s: per-lock cost flat from 1,000 to %s held locks, within one core", b, commas(want)),
			measured: measured, met: ok, costs: fmt.Sprintf("at %s: %s; at %s: %s", commas(lo.locks), heldCost(lo), commas(hi.locks), heldCost(hi))})
	}
	top := slices.Max(run.cfg.contenders)
	for _, b := range run.backends(false) {
		rows := run.hotOf(b)
		what := fmt.Sprintf("%s: hand-off cost flat in waiters (%d contenders against %d)", b, top, growthRef)
		var ref, far *hotGrowth
		for i := range rows {
			switch rows[i].n {
			case growthRef:
				ref = &rows[i]
			case top:
				far = &rows[i]
			}
		}
		switch {
		case ref == nil || ref.unfinished || ref.handoffs == 0:
			gs = append(gs, goal{what: what, measured: fmt.Sprintf("no hand-off at %d contenders", growthRef)})
			continue
		case far == nil || far.unfinished || far.handoffs == 0:
			gs = append(gs, goal{what: what, measured: fmt.Sprintf("no finished cell with hand-offs at %d contenders", top)})
			continue
		}
		cpuRef, cpuFar, which := ref.server, far.server, "server CPU"
		if ref.server < 0 {
			cpuRef, cpuFar, which = ref.client, far.client, "CPU (client and server)"
		}
		ok := true
		var parts []string
		for _, c := range []struct {
			what     string
			ref, far float64
		}{{ref.unit, ref.requests, far.requests}, {which, cpuRef, cpuFar}} {
			if c.ref <= 0 {
				parts = append(parts, fmt.Sprintf("%s per hand-off too small to measure at %d", c.what, growthRef))
				ok = false
				continue
			}
			parts = append(parts, fmt.Sprintf("%s per hand-off %s×", c.what, f2(c.far/c.ref)))
			ok = ok && c.far/c.ref <= growthFlat
		}
		gs = append(gs, goal{what: what, measured: strings.Join(parts, ", "), met: ok,
			costs: fmt.Sprintf("at %d: %s; at %d: %s", ref.n, hotCost(*ref), far.n, hotCost(*far))})
	}
	return gs
}

func heldCost(h heldGrowth) string {
	s := fmt.Sprintf("%s µs/s client", f2(h.clientPerLock()))
	if h.server >= 0 {
		s += fmt.Sprintf(", %s µs/s server", f2(h.serverPerLock()))
	}
	return s + fmt.Sprintf(" per lock, %s %s/s", rate(h.cmdsPerSec()), h.cmdsUnit)
}

// rate prints a rate per second: whole above 10, with two decimals below.
func rate(v float64) string {
	if v < 10 {
		return f2(v)
	}
	return f0(v)
}

func hotCost(h hotGrowth) string {
	s := fmt.Sprintf("%s %s, %s µs client", f1(h.requests), h.unit, f1(h.client))
	if h.server >= 0 {
		s += fmt.Sprintf(", %s µs server", f1(h.server))
	}
	if h.writes >= 0 {
		s += fmt.Sprintf(", %s Raft writes", f2(h.writes))
	}
	s += fmt.Sprintf(", p50 %s", ms(h.p50.Seconds()))
	if len(h.calls) > 0 {
		s += " (" + h.callsWhat + " per hand-off: " + topCalls(h.calls, 4) + ")"
	}
	return s
}

// topCalls prints the n commands run most often, with their counts.
func topCalls(calls map[string]float64, n int) string {
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if calls[a] != calls[b] {
			if calls[a] > calls[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, k := range names[:min(n, len(names))] {
		out = append(out, fmt.Sprintf("%s %s", k, f1(calls[k])))
	}
	return strings.Join(out, ", ")
}
