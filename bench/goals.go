package main

import (
	"fmt"
	"slices"
	"strings"
)

// A goal is one target dlock is held to, checked against this run's
// medians.
type goal struct {
	what     string
	measured string
	met      bool
	// costs says where the time goes, for a goal that compares cycles:
	// the measured cost of a cycle on each side.
	costs string
}

// starved is the share of the mean below which a contender counts as
// starved: it got fewer than half the acquisitions of an even share.
const starved = 0.5

func (r *results) goals(p printer) {
	var gs []goal
	gs = append(gs, r.redisGoals()...)
	gs = append(gs, r.etcdGoals()...)
	if r.redlock != nil {
		gs = append(gs, r.redlock.goals()...)
	}
	if r.growth != nil {
		gs = append(gs, r.growth.goals()...)
	}
	writeGoals(p, gs, "Each goal checked against the medians above (ratios over the repeats of this run). Where the time goes: the\n"+
		"median cost of one cycle on each side, from the same cells (round trips; Redis CPU, or for etcd Raft writes;\n"+
		"client CPU, which for etcd includes the embedded server's).")
}

// writeGoals writes gs as the "## Goals" table, after intro.
func writeGoals(p printer, gs []goal, intro string) {
	if len(gs) == 0 {
		return
	}
	p("## Goals")
	p("")
	if intro != "" {
		p("%s", intro)
		p("")
	}
	goalRows(p, gs)
	p("")
}

// goalRows writes gs as a table, without a heading.
func goalRows(p printer, gs []goal) {
	p("| goal | measured | met | where the time goes |")
	p("|---|---|---|---|")
	for _, g := range gs {
		met := "yes"
		if !g.met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s |", g.what, g.measured, met, g.costs)
	}
}

func (r *results) redisGoals() []goal {
	var gs []goal
	dl, fenced, bounded := dlockSys{}.name(), dlockSys{fenced: true}.name(), dlockSys{bounded: true}.name()
	if len(r.uncont) > 0 {
		gmax := slices.Max(r.cfg.goroutines)
		st := ratio(cellsOf(r.uncont, ukey, dl, gmax), r.bestFloor(gmax))
		gs = append(gs, goal{fmt.Sprintf("dlock ≥ 1.0× the best floor at %d goroutines", gmax), f2(st.med) + "×", st.med >= 1,
			r.redisCosts(gmax, dl, r.bestFloorName(gmax))})
		for _, g := range r.cfg.goroutines {
			if g == gmax {
				continue
			}
			plain := rates(cellsOf(r.uncont, ukey, floor{}.name(), g))
			st := ratio(cellsOf(r.uncont, ukey, dl, g), plain)
			measured := f2(st.med) + "×"
			if b := cellsOf(r.uncont, ukey, bounded, g); len(b) > 0 {
				measured += fmt.Sprintf(" (%s: %s×)", bounded, f2(ratio(b, plain).med))
			}
			gs = append(gs, goal{fmt.Sprintf("dlock ≥ 1.0× the plain floor at %d goroutine%s", g, plural(g)), measured, st.med >= 1,
				r.redisCosts(g, dl, floor{}.name())})
		}
		gs = append(gs, r.perCycleGoal("dlock allocations per cycle ≤ the plain floor's at every concurrency", "allocs", cell.allocsPer, f1, 0))
		// A cell's calls are what the server ran in its window, which
		// counts a cycle cut by the window's edge and what no cycle sends
		// (a new connection's HELLO): within callSlack, the counts agree.
		gs = append(gs, r.perCycleGoal("dlock's uncontended cycle (nobody waits or watches): no more Redis calls than the floor's at every concurrency",
			"calls", cell.callsPer, f1, callSlack))
		var parts, costs []string
		ok := true
		for _, g := range r.cfg.goroutines {
			st := ratio(cellsOf(r.uncont, ukey, fenced, g), rates(cellsOf(r.uncont, ukey, dl, g)))
			parts = append(parts, fmt.Sprintf("%s× at %d", f2(st.med), g))
			costs = append(costs, fmt.Sprintf("at %d: %s", g, r.redisCosts(g, fenced, dl)))
			ok = ok && st.med >= 0.9
		}
		gs = append(gs, goal{"dlock fenced ≥ 0.9× dlock at every concurrency", strings.Join(parts, ", "), ok, strings.Join(costs, "; ")})
	}
	if len(r.hot) > 0 {
		for _, n := range r.cfg.contenders {
			if n < 8 {
				continue
			}
			own := collect(cellsOf(r.hot, hkey, dl, n), p50).med
			best, bestName := 0.0, ""
			for _, s := range r.hotSystems {
				if strings.HasPrefix(s, "dlock") {
					continue
				}
				if v := collect(cellsOf(r.hot, hkey, s, n), p50).med; bestName == "" || v < best {
					best, bestName = v, s
				}
			}
			per, _, _ := sums(cellsOf(r.hot, hkey, dl, n), n)
			even := mean(per)
			fair := even > 0 && float64(slices.Min(per)) >= starved*even
			gs = append(gs, goal{fmt.Sprintf("hot key, %d contenders: dlock's hand-off p50 ahead of every peer, no contender starved", n),
				fmt.Sprintf("%s against %s (%s); fewest acquisitions %d, mean %.0f", ms(own), ms(best), bestName, slices.Min(per), even),
				own < best && fair, ""})
		}
	}
	if len(r.holds) > 0 {
		var own, peer *holdCell
		for i := range r.holds {
			switch r.holds[i].sys {
			case dl:
				own = &r.holds[i]
			case rueidisLockSys{}.name():
				peer = &r.holds[i]
			}
		}
		if own != nil && peer != nil && peer.clientCore > 0 {
			x := own.clientCore / peer.clientCore
			gs = append(gs, goal{fmt.Sprintf("%d held locks at ≤ 1/10 of rueidislock's client CPU", own.locks),
				fmt.Sprintf("%.4f against %.4f cores (%.2f×)", own.clientCore, peer.clientCore, x), x <= 0.1,
				fmt.Sprintf("dlock: %d goroutines, %.0f Redis commands/s, %.3f Redis cores; rueidislock: %d goroutines, %.0f commands/s, %.3f Redis cores",
					own.goroutines, own.cmdsPerSec, own.redisCore, peer.goroutines, peer.cmdsPerSec, peer.redisCore)})
		}
	}
	return gs
}

func (r *results) etcdGoals() []goal {
	var gs []goal
	dl, mu := etcdlockSys{}.name(), mutexSys{}.name()
	for _, run := range r.etcd {
		m := fmt.Sprintf("%d member%s", run.members, plural(run.members))
		var parts, costs []string
		fast, writes := true, true
		var wparts []string
		for _, g := range r.cfg.goroutines {
			st := ratio(cellsOf(run.uncont, ukey, dl, g), run.mutexRates(g))
			parts = append(parts, fmt.Sprintf("%s× at %d", f2(st.med), g))
			costs = append(costs, fmt.Sprintf("at %d: %s", g, etcdCosts(run, g)))
			fast = fast && st.med >= 1
			w := collect(cellsOf(run.uncont, ukey, dl, g), cell.writesPer).med
			wm := collect(cellsOf(run.uncont, ukey, mu, g), cell.writesPer).med
			wparts = append(wparts, fmt.Sprintf("%s against %s at %d", f2(w), f2(wm), g))
			writes = writes && w <= wm
		}
		gs = append(gs, goal{fmt.Sprintf("etcd, %s: dlock ≥ 1.0× concurrency.Mutex uncontended", m), strings.Join(parts, ", "), fast, strings.Join(costs, "; ")})
		gs = append(gs, goal{fmt.Sprintf("etcd, %s: no more Raft writes per cycle than the Mutex", m), strings.Join(wparts, ", "), writes, ""})
		var rparts []string
		trips := true
		for _, g := range r.cfg.goroutines {
			a := collect(cellsOf(run.uncont, ukey, dl, g), cell.rttPer).med
			b := collect(cellsOf(run.uncont, ukey, mu, g), cell.rttPer).med
			rparts = append(rparts, fmt.Sprintf("%s against %s at %d", f2(a), f2(b), g))
			trips = trips && a <= b
		}
		gs = append(gs, goal{fmt.Sprintf("etcd, %s: no watch of its own per hold: no more round trips per uncontended cycle than the Mutex", m),
			strings.Join(rparts, ", "), trips, ""})
		for _, n := range r.cfg.etcdContenders {
			what := fmt.Sprintf("etcd, %s, %d contenders: hand-off p50 no worse than the Mutex's", m, n)
			whatRTT := fmt.Sprintf("etcd, %s, %d contenders: a waiter waits on its predecessor alone: round trips per acquisition ≤ the Mutex's", m, n)
			own, ownLeft := finished(cellsOf(run.hot, hkey, dl, n))
			ref, _ := finished(cellsOf(run.hot, hkey, mu, n))
			if len(own) == 0 || len(ref) == 0 {
				why := fmt.Sprintf("no finished cell (dlock: %d of %d unfinished)", ownLeft, ownLeft+len(own))
				gs = append(gs, goal{what, why, false, ""}, goal{whatRTT, why, false, ""})
				continue
			}
			ownH, refH := withHandoffs(own), withHandoffs(ref)
			if len(ownH) < len(own) || len(refH) == 0 {
				why := fmt.Sprintf("dlock: no hand-off in %d of %d finished repeats", len(own)-len(ownH), len(own))
				gs = append(gs, goal{what, why, false, ""}, goal{whatRTT, why, false, ""})
				continue
			}
			a, b := collect(ownH, p50).med, collect(refH, p50).med
			ra, rb := collect(ownH, func(c hotCell) float64 { return c.rttPer() }).med, collect(refH, func(c hotCell) float64 { return c.rttPer() }).med
			gs = append(gs, goal{what, fmt.Sprintf("%s against %s", ms(a), ms(b)), a <= b && ownLeft == 0,
				fmt.Sprintf("round trips/acq %s against %s", f2(ra), f2(rb))})
			// A waiter that waits on its predecessor alone makes a
			// hand-off cost the same whatever the line's length.
			gs = append(gs, goal{whatRTT,
				fmt.Sprintf("%s against %s", f2(ra), f2(rb)), ra <= rb && ownLeft == 0, ""})
		}
	}
	return gs
}

// callSlack is how far a cell's Redis calls per cycle may stray from the
// cycle's own: redislock's count test asserts the exact figure.
const callSlack = 0.05

// perCycleGoal compares dlock's median per-cycle figure f with the plain
// floor's at every concurrency: met when dlock's is no larger than the
// floor's plus slack anywhere.
func (r *results) perCycleGoal(what, unit string, f func(cell) float64, format func(float64) string, slack float64) goal {
	dl, fl := dlockSys{}.name(), floor{}.name()
	var parts []string
	ok := true
	for _, g := range r.cfg.goroutines {
		a, b := collect(cellsOf(r.uncont, ukey, dl, g), f).med, collect(cellsOf(r.uncont, ukey, fl, g), f).med
		parts = append(parts, fmt.Sprintf("%s against %s %s at %d", format(a), format(b), unit, g))
		ok = ok && a <= b+slack
	}
	return goal{what: what, measured: strings.Join(parts, ", "), met: ok}
}

func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s int64
	for _, x := range xs {
		s += x
	}
	return float64(s) / float64(len(xs))
}

// redisCosts compares the median cost of a cycle of systems a and b at g
// goroutines.
func (r *results) redisCosts(g int, a, b string) string {
	one := func(s string) string {
		cs := cellsOf(r.uncont, ukey, s, g)
		return fmt.Sprintf("%s %s round trips, %s Redis calls, %s µs Redis CPU, %s µs client CPU, %s allocs", s,
			f2(collect(cs, cell.rttPer).med), f1(collect(cs, cell.callsPer).med), f1(collect(cs, cell.redisCPUPer).med),
			f1(collect(cs, cell.clientCPUPer).med), f0(collect(cs, cell.allocsPer).med))
	}
	return one(a) + "; " + one(b)
}

// bestFloorName is the floor fastest in most repeats at g goroutines.
func (r *results) bestFloorName(g int) string {
	wins := map[string]int{}
	best := r.bestFloor(g)
	for _, f := range floorSystems() {
		for i, x := range rates(cellsOf(r.uncont, ukey, f.name(), g)) {
			if i < len(best) && x == best[i] {
				wins[f.name()]++
			}
		}
	}
	name := floor{}.name()
	for _, f := range floorSystems() {
		if wins[f.name()] > wins[name] {
			name = f.name()
		}
	}
	return name
}

// etcdCosts compares the median cost of a cycle of dlock and the Mutex at g
// goroutines in run.
func etcdCosts(run etcdRun, g int) string {
	var out []string
	for _, s := range []string{etcdlockSys{}.name(), mutexSys{}.name()} {
		cs := cellsOf(run.uncont, ukey, s, g)
		out = append(out, fmt.Sprintf("%s %s round trips, %s µs CPU", s, f2(collect(cs, cell.rttPer).med), f0(collect(cs, cell.clientCPUPer).med)))
	}
	return strings.Join(out, ", ")
}
