package faults

import (
	"context"
	"slices"
	"time"
)

// A stall is a time a process of the run did not run although nothing
// stopped it: the machine gave its CPU to others. The processes of a run
// watch for their own stalls and record them, and the checker does not
// count them against a Lock call's time (see Report.Stuck): a call that a
// loaded machine did not let run is not a call that got stuck.
const (
	stallTick = 10 * time.Millisecond // how often a watcher looks at the clock
	stallMin  = 50 * time.Millisecond // the shortest stall recorded, beyond the tick
)

// watchStalls calls record with the start and end of each stall of this
// process until ctx ends: the times its watcher, waking every stallTick,
// woke more than stallMin late.
func watchStalls(ctx context.Context, record func(from, to int64)) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := now()
		if n-last > int64(stallTick+stallMin) {
			record(last+int64(stallTick), n)
		}
		last = n
	}
}

// stalledBetween is how long the stalls ps, which may overlap, cover of
// [from, to).
func stalledBetween(ps [][2]int64, from, to int64) int64 {
	var total, reach int64 = 0, from
	for _, p := range sortedSpans(ps) {
		a, b := max(p[0], reach), min(p[1], to)
		if b > a {
			total += b - a
		}
		reach = max(reach, p[1])
	}
	return total
}

// sortedSpans returns the spans ps in the order of their starts.
func sortedSpans(ps [][2]int64) [][2]int64 {
	s := slices.Clone(ps)
	slices.SortFunc(s, func(a, b [2]int64) int { return cmpInt(a[0], b[0]) })
	return s
}
