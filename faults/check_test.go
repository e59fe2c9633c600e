package faults

import (
	"testing"
	"time"
)

// ms is a CLOCK_MONOTONIC reading n milliseconds into a made-up history
// (which, like a real one, does not start at zero).
func ms(n int) int64 { return int64(time.Hour) + int64(n)*int64(time.Millisecond) }

// A history of two holds one after the other is clean; each kind of
// violation in a made-up history is counted.
func TestCheck(t *testing.T) {
	cfg := Config{TTL: time.Second, Wait: 2 * time.Second}
	seq := func(id string, w int, start, acq int, fence uint64, rel, relok int) []event {
		return []event{
			{E: "start", Hold: id, T: ms(start), Worker: w},
			{E: "acq", Hold: id, T: ms(acq), Fence: fence, Worker: w},
			{E: "rel", Hold: id, T: ms(rel), Worker: w},
			{E: "relok", Hold: id, T: ms(relok), Worker: w},
		}
	}
	clean := append(seq("0.0.0", 0, 0, 1, 10, 50, 51), seq("1.0.0", 1, 2, 52, 11, 90, 91)...)
	writes := []write{{"0.0.0", 10, ms(20), true}, {"0.0.0", 10, ms(40), true}, {"1.0.0", 11, ms(60), true}, {"1.0.0", 11, ms(80), true}}
	r := check(cfg, clean, writes, nil, nil, nil)
	if !r.OK() || r.Holds != 2 || r.Overlaps != 0 || r.Fenced != 0 || r.LateLoss != 0 {
		t.Fatalf("a clean history: %s", r)
	}

	// 0.0.0 paused past its lease: 1.0.0 took the lock (fence 11) and
	// wrote; 0.0.0's late write was refused, and its loss came late.
	paused := append(seq("0.0.0", 0, 0, 1, 10, 3000, 3001), seq("1.0.0", 1, 2, 1500, 11, 1600, 1601)...)
	paused = append(paused, event{E: "done", Hold: "0.0.0", T: ms(2999), Lost: true, Worker: 0})
	writes = []write{{"0.0.0", 10, ms(20), true}, {"1.0.0", 11, ms(1550), true}, {"0.0.0", 10, ms(2999), false}}
	r = check(cfg, paused, writes, nil, nil, nil)
	if !r.OK() || r.Overlaps != 1 || r.Fenced != 1 || r.LateLoss != 1 {
		t.Fatalf("a paused holder stopped by the fence: %s", r)
	}

	// The same without a fence check: interleaved accepted writes, and a
	// fence that did not grow.
	writes = []write{{"0.0.0", 10, ms(20), true}, {"1.0.0", 10, ms(1550), true}, {"0.0.0", 10, ms(2999), true}}
	unfenced := append(seq("0.0.0", 0, 0, 1, 10, 50, 51), seq("1.0.0", 1, 52, 60, 10, 90, 91)...)
	r = check(cfg, unfenced, writes, nil, nil, nil)
	if r.Unsafe != 1 || r.Regressions != 1 || r.OK() || len(r.Violations) != 2 {
		t.Fatalf("interleaved writes and a repeated fence: %s", r)
	}

	// A Lock call of 10s with a 2s wait is stuck, unless its worker was
	// paused meanwhile.
	stuck := []event{{E: "start", Hold: "2.0.0", T: ms(0), Worker: 2}, {E: "fail", Hold: "2.0.0", T: ms(10000), Busy: true, Worker: 2}}
	if r = check(cfg, stuck, nil, nil, nil, nil); r.Stuck != 1 {
		t.Fatalf("a 10s Lock call: %s", r)
	}
	if r = check(cfg, stuck, nil, nil, nil, map[int][][2]int64{2: {{ms(1000), ms(9000)}}}); r.Stuck != 0 {
		t.Fatalf("a 10s Lock call of a paused worker: %s", r)
	}
}
