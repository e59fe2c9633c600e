package faults

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A stall is a time a process of the run did not run although nothing
// stopped it: the machine gave its CPU to others. The processes of a run
// watch for their own stalls and record them, and the checker does not
// count them against a Lock call's time (see Report.Stuck): a call that a
// loaded machine did not let run is not a call that got stuck.
//
// The tick is coarse on purpose: at 10ms, the wake-ups kept the Go
// runtime's monitor thread (sysmon) of each of the hundred processes of
// go test's runs polling, perf counted a fifth of the machine's CPU in
// them, and the runs starved (5 holds in 30s where an unloaded run
// makes 50).
const (
	stallTick = 50 * time.Millisecond // how often a watcher looks at the clock
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

// runDelay is how long the threads of process pid ("self" for this one)
// have waited, runnable, for a CPU since they started, in nanoseconds:
// the sum of their schedstat run delays, 0 where the kernel does not
// keep them. A process the machine is too loaded to run, such as a new
// one starting while hundreds of others are runnable, waits there rather
// than in the gaps of a stall watcher, which needs the CPU for an instant
// only.
func runDelay(pid string) int64 {
	tasks, _ := filepath.Glob(filepath.Join("/proc", pid, "task", "*", "schedstat"))
	var sum int64
	for _, name := range tasks {
		raw, err := os.ReadFile(name)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(raw)); len(f) >= 2 {
			if d, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				sum += d
			}
		}
	}
	return sum
}

// watchRunDelay samples the run delay of process pid every 50ms until
// done closes, and returns the last sample: what the process had
// waited for a CPU by the time it ended, give or take a tick.
func watchRunDelay(pid int, done <-chan struct{}) int64 {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var last int64
	for {
		if d := runDelay(strconv.Itoa(pid)); d > 0 {
			last = d
		}
		select {
		case <-done:
			return last
		case <-t.C:
		}
	}
}
