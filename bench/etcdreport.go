package main

import (
	"fmt"
	"slices"
	"strings"
)

func membersList(runs []etcdRun) string {
	var s []string
	for _, r := range runs {
		s = append(s, fmt.Sprintf("%d member%s", r.members, plural(r.members)))
	}
	return strings.Join(s, " and ")
}

// mutexRates are the rates of etcd's Mutex in run at g goroutines, by
// repeat: the reference of the etcd ratios.
func (run etcdRun) mutexRates(g int) []float64 {
	return rates(cellsOf(run.uncont, ukey, mutexSys{}.name(), g))
}

func (r *results) part5(p printer) {
	p("## 5. etcd")
	p("")
	p("dlock's etcd driver beside etcd's own `concurrency.Mutex` on the same embedded cluster. Uncontended as in part 1")
	p("(one client per system, a key per goroutine, one attempt per cycle); hot key as in part 2 (own client per")
	p("contender, hold %v). Ratio: cycles/s over the Mutex's in the same repeat. A Raft write is one store revision;", r.cfg.hold)
	p("CPU is this process's, the embedded etcd's included.")
	p("")
	p("![etcd](etcd.svg)")
	p("")
	p("| members | system | goroutines | cycles/s | × Mutex | round trips/cycle | Raft writes/cycle | allocs/cycle | CPU µs/cycle |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, run := range r.etcd {
		for _, g := range r.cfg.goroutines {
			ref := run.mutexRates(g)
			for _, s := range r.eSystems {
				cs := cellsOf(run.uncont, ukey, s, g)
				p("| %d | %s | %d | %s | %s | %s | %s | %s | %s |", run.members, s, g,
					fmtStat(collect(cs, cell.rate), f0), fmtStat(ratio(cs, ref), f2),
					f2(collect(cs, cell.rttPer).med), f2(collect(cs, cell.writesPer).med),
					f0(collect(cs, cell.allocsPer).med), f0(collect(cs, cell.clientCPUPer).med))
			}
		}
	}
	p("")
	p("| members | system | contenders | acquisitions/s | hand-off p50 | hand-off p99 | acquisitions per contender (min–max) | round trips/acq | Raft writes/acq | overlaps | turn timeouts |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, run := range r.etcd {
		for _, n := range r.cfg.etcdContenders {
			for _, s := range r.eSystems {
				cs, unfinished := finished(cellsOf(run.hot, hkey, s, n))
				if len(cs) == 0 {
					p("| %d | %s | %d | did not finish within %v%s | | | | | | | |", run.members, s, n, r.cfg.etcdHotDuration+r.cfg.etcdGrace, skippedNote(run.hot, s, n))
					continue
				}
				per, overlaps, timeouts := sums(cs, n)
				label := s
				if unfinished > 0 {
					label += fmt.Sprintf(" (%d of %d repeats did not finish within %v%s)", unfinished, unfinished+len(cs), r.cfg.etcdHotDuration+r.cfg.etcdGrace, skippedNote(run.hot, s, n))
				}
				p50s, p99s := latencies(cs)
				p("| %d | %s | %d | %s | %s | %s | %d–%d | %s | %s | %d | %d |", run.members, label, n,
					fmtStat(collect(cs, func(c hotCell) float64 { return c.rate() }), f0),
					p50s, p99s,
					slices.Min(per), slices.Max(per),
					f2(collect(cs, func(c hotCell) float64 { return c.rttPer() }).med),
					f2(collect(cs, func(c hotCell) float64 { return c.writesPer() }).med),
					overlaps, timeouts)
			}
		}
	}
	p("")
	p("Acquisitions per contender are summed over the repeats.")
	p("")
}

// finished returns the cells of cs that finished, and how many did not.
func finished(cs []hotCell) ([]hotCell, int) {
	var done []hotCell
	for _, c := range cs {
		if !c.unfinished {
			done = append(done, c)
		}
	}
	return done, len(cs) - len(done)
}

// skippedNote says how many repeats of a cell were not run after it did
// not finish.
func skippedNote(hot []hotCell, sys string, n int) string {
	var k int
	for _, c := range cellsOf(hot, hkey, sys, n) {
		if c.skipped {
			k++
		}
	}
	if k == 0 {
		return ""
	}
	return fmt.Sprintf("; not run again in the %d later repeat%s", k, plural(k))
}

// withHandoffs returns the cells of cs that saw a hand-off: a latency
// quantile means nothing in the others.
func withHandoffs(cs []hotCell) []hotCell {
	var r []hotCell
	for _, c := range cs {
		if c.handoffs > 0 {
			r = append(r, c)
		}
	}
	return r
}

// latencies formats the hand-off p50 and p99 of cs over the repeats that
// saw a hand-off, saying how many did not.
func latencies(cs []hotCell) (p50s, p99s string) {
	h := withHandoffs(cs)
	if len(h) == 0 {
		return "no hand-off", "no hand-off"
	}
	p50s, p99s = fmtStat(collect(h, p50), ms), fmtStat(collect(h, p99), ms)
	if len(h) < len(cs) {
		note := fmt.Sprintf(" (%d of %d repeats had none)", len(cs)-len(h), len(cs))
		p50s += note
		p99s += note
	}
	return p50s, p99s
}

func p50(c hotCell) float64 { return c.quantile(0.5).Seconds() }
func p99(c hotCell) float64 { return c.quantile(0.99).Seconds() }

// sums adds up, over the repeats cs of one hot-key cell with n contenders,
// the acquisitions of each contender, the overlaps and the turn timeouts.
func sums(cs []hotCell, n int) (per []int64, overlaps, timeouts int64) {
	per = make([]int64, n)
	for _, c := range cs {
		for i, v := range c.perParty {
			per[i] += v
		}
		overlaps += c.overlaps
		timeouts += c.timeouts
	}
	return per, overlaps, timeouts
}

func (r *results) etcdChart() chart {
	c := chart{title: "etcd: uncontended lock+unlock relative to concurrency.Mutex (median, min–max)",
		unit: "cycles/s ÷ Mutex cycles/s in the same repeat", ref: 1, refLabel: "Mutex"}
	for _, s := range r.eSystems {
		if s != (mutexSys{}).name() {
			c.series = append(c.series, s)
		}
	}
	for _, run := range r.etcd {
		for _, g := range r.cfg.goroutines {
			c.groups = append(c.groups, fmt.Sprintf("%d member%s, %d goroutine%s", run.members, plural(run.members), g, plural(g)))
			ref := run.mutexRates(g)
			var row []bar
			for _, s := range c.series {
				cs := cellsOf(run.uncont, ukey, s, g)
				st := ratio(cs, ref)
				b := st.bar()
				b.label = fmt.Sprintf("%.2f× (%.0f/s)", st.med, collect(cs, cell.rate).med)
				row = append(row, b)
			}
			c.vals = append(c.vals, row)
		}
	}
	return c
}
