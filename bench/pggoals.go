package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// These name the systems of the PostgreSQL part that its goals compare.
const (
	pgDlock = "dlock postgreslock"
	pgFloor = "lease row" // the prefix of the durable lease-row floor's name
)

// pgSummary is one system's median uncontended cycles per second at
// each number of goroutines, and its hand-off at each number of
// contenders: what the PostgreSQL goals are checked against.
type pgSummary struct {
	name   string
	cycles []float64 // by goroutines
	p50    []time.Duration
	stmts  []float64 // statements per acquisition, by contenders
}

// pgGoals checks the PostgreSQL driver's goals against this run: hand-off
// p50 at most a millisecond and at most 4 statements per contended
// acquisition at every number of contenders, uncontended at least the
// durable lease row's cycles at every number of goroutines, and 1,000
// held locks within 1% of a core each side beyond the idle baseline
// (held[0]).
func pgGoals(sys []pgSummary, goroutines, contenders []int, held []pgHeld) []goal {
	var d, f *pgSummary
	for i := range sys {
		switch {
		case sys[i].name == pgDlock:
			d = &sys[i]
		case strings.HasPrefix(sys[i].name, pgFloor):
			f = &sys[i]
		}
	}
	if d == nil || f == nil {
		return nil
	}
	var gs []goal
	var p50s, stmts []string
	p50Met, stmtsMet := true, true
	for ci, c := range contenders {
		p50s = append(p50s, fmt.Sprintf("%s at %d", pgMS(d.p50[ci]), c))
		stmts = append(stmts, fmt.Sprintf("%.1f at %d", d.stmts[ci], c))
		p50Met = p50Met && d.p50[ci] > 0 && d.p50[ci] <= time.Millisecond
		stmtsMet = stmtsMet && d.stmts[ci] <= 4
	}
	gs = append(gs,
		goal{what: "hand-off p50 ≤ 1 ms at every number of contenders", measured: strings.Join(p50s, ", "), met: p50Met},
		goal{what: "statements per contended acquisition ≤ 4", measured: strings.Join(stmts, ", "), met: stmtsMet})
	var ratios []string
	uMet := true
	for gi, g := range goroutines {
		r := d.cycles[gi] / f.cycles[gi]
		ratios = append(ratios, fmt.Sprintf("%s× at %d", f2(r), g))
		uMet = uMet && r >= 1
	}
	gs = append(gs, goal{what: "uncontended ≥ 1.0× the durable lease row at every number of goroutines", measured: strings.Join(ratios, ", "), met: uMet})
	if len(held) > 1 {
		client, server := held[1].client-held[0].client, held[1].server-held[0].server
		gs = append(gs, goal{what: fmt.Sprintf("%d held locks: at most 1%% of a core each side beyond the idle baseline", held[1].locks),
			measured: fmt.Sprintf("client %.1f %%, server %.1f %%", client, server), met: client <= 1 && server <= 1})
	}
	return gs
}

// middle is the median of v, or of its upper half's first value when v
// has an even length; v is not changed.
func middle(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
