package main

import (
	"testing"
	"time"
)

func TestPGGoals(t *testing.T) {
	floor := pgSummary{name: "lease row, polled every 5ms", cycles: []float64{100, 200, 300}}
	idle := pgHeld{client: 0.1, server: 0.2}
	for _, tc := range []struct {
		name   string
		dlock  pgSummary
		held   pgHeld
		wantOK [4]bool // hand-off p50, statements, uncontended, held
	}{
		{"all met", pgSummary{name: pgDlock, cycles: []float64{100, 250, 301}, p50: []time.Duration{900 * time.Microsecond, time.Millisecond}, stmts: []float64{2, 4}},
			pgHeld{locks: 1000, client: 0.5, server: 1.2}, [4]bool{true, true, true, true}},
		{"each missed", pgSummary{name: pgDlock, cycles: []float64{100, 199, 400}, p50: []time.Duration{900 * time.Microsecond, 1001 * time.Microsecond}, stmts: []float64{4.1, 2}},
			pgHeld{locks: 1000, client: 1.2, server: 0.3}, [4]bool{false, false, false, false}},
		{"no hand-off measured", pgSummary{name: pgDlock, cycles: []float64{100, 200, 300}, p50: []time.Duration{0, 0}, stmts: []float64{0, 0}},
			pgHeld{locks: 1000, client: 0.1, server: 0.2}, [4]bool{false, true, true, true}},
	} {
		gs := pgGoals([]pgSummary{floor, tc.dlock}, []int{1, 8, 64}, []int{8, 32}, []pgHeld{idle, tc.held})
		if len(gs) != 4 {
			t.Fatalf("%s: %d goals, want 4", tc.name, len(gs))
		}
		for i, g := range gs {
			if g.met != tc.wantOK[i] {
				t.Errorf("%s: goal %q met = %v (measured %s), want %v", tc.name, g.what, g.met, g.measured, tc.wantOK[i])
			}
		}
	}
	if gs := pgGoals([]pgSummary{floor}, []int{1}, []int{8}, nil); gs != nil {
		t.Errorf("goals without dlock's row: %v, want none", gs)
	}
}
