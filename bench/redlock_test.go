package main

import (
	"strings"
	"testing"
	"time"
)

// The Redlock goal compares the server CPU per hand-off of a Redlock on
// three servers with the single server's at every number of contenders,
// and is met at 3× or less only; the Redlock of five servers does not
// count.
func TestRedlockGoal(t *testing.T) {
	cell := func(sys string, n int, cpu time.Duration, handoffs int64) hotCell {
		m := &meter{server: serverStats{cpu: cpu, calls: map[string]int64{"evalsha": 2 * handoffs}, usec: map[string]int64{"evalsha": 10 * handoffs}}}
		return hotCell{cell: cell{sys: sys, n: n, ops: handoffs, m: m}, handoffs: handoffs}
	}
	for _, c := range []struct {
		redlock8, redlock32 time.Duration
		met                 bool
	}{
		{300 * time.Millisecond, 250 * time.Millisecond, true},  // 3× and 2.5×
		{300 * time.Millisecond, 310 * time.Millisecond, false}, // 3× and 3.1×
	} {
		run := &redlockRun{hot: []hotCell{
			cell(redlock3Name, 8, c.redlock8, 100), cell(singleName, 8, 100*time.Millisecond, 100),
			cell(redlock3Name, 32, c.redlock32, 100), cell(singleName, 32, 100*time.Millisecond, 100),
			cell(redlockSys{}.name(), 8, time.Second, 100), cell(redlockSys{}.name(), 32, time.Second, 100),
		}}
		gs := run.goals()
		if len(gs) != 1 {
			t.Fatalf("got %d goals, want 1", len(gs))
		}
		g := gs[0]
		if g.met != c.met || !strings.Contains(g.measured, "at 8 contenders") || !strings.Contains(g.costs, "evalsha 2.0/hand-off (0.7 per node) at 5.0 µs") {
			t.Errorf("redlock %v, %v against 1ms a hand-off: got %+v, want met %v", c.redlock8, c.redlock32, g, c.met)
		}
	}
	if gs := (&redlockRun{}).goals(); gs[0].met {
		t.Errorf("no cells: the goal is met: %+v", gs[0])
	}
}
