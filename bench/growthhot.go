package main

import (
	"context"
	"fmt"
	"time"
)

// hotGrowth is one key with n contenders on one backend.
type hotGrowth struct {
	backend      string
	n            int
	p50          time.Duration
	acquisitions int64
	handoffs     int64
	// Per hand-off: requests (round trips, or statements for PostgreSQL),
	// server CPU in µs (-1: the server runs in this process), client CPU
	// in µs, and Raft writes (etcd; -1 elsewhere).
	requests, server, client, writes float64
	unit                             string // what requests counts
	unfinished                       bool
	// calls are the commands a Redis server ran per hand-off (summed over
	// the servers), those inside scripts included, or the statements sent
	// to PostgreSQL, by the start of their text.
	calls     map[string]float64
	callsWhat string
}

// hotRow is a hot-key cell as a row of part 7.
func hotRow(backend, unit string, c hotCell, inProcess bool) hotGrowth {
	row := hotGrowth{backend: backend, n: c.n, unit: unit, unfinished: c.unfinished, server: -1, writes: -1}
	if c.unfinished {
		return row
	}
	row.p50, row.acquisitions, row.handoffs = c.quantile(0.5), c.ops, c.handoffs
	row.requests, row.client = c.rttPerHandoff(), c.clientCPUPerHandoff()
	if inProcess {
		row.writes = c.writesPerHandoff()
		return row
	}
	row.server = c.serverCPUPerHandoff()
	if c.m != nil && c.handoffs > 0 {
		row.calls, row.callsWhat = map[string]float64{}, "Redis calls"
		for k, v := range c.m.server.calls {
			row.calls[k] = float64(v) / float64(c.handoffs)
		}
	}
	return row
}

// growHot measures cell at each number of contenders of cfg; after a cell
// that does not finish, the larger ones are not tried.
func growHot(cfg config, run *growthRun, backend string, cell func(n int) (hotGrowth, error)) error {
	for _, n := range cfg.growth.contenders {
		row, err := cell(n)
		if err != nil {
			return fmt.Errorf("%s, %d contenders: %w", backend, n, err)
		}
		run.hot = append(run.hot, row)
		if row.unfinished {
			run.notes = append(run.notes, fmt.Sprintf("%s with %d contenders did not finish within %v of its end; more contenders were not tried.",
				backend, n, cfg.etcdGrace))
			cfg.logf("growth  hot   %-26s %4d contenders  unfinished", backend, n)
			return nil
		}
		cfg.logf("growth  hot   %-26s %4d contenders  p50 %v  %d hand-offs  %.1f %s/hand-off  server %.1f µs  client %.1f µs  writes %.2f",
			backend, n, row.p50.Round(time.Microsecond), row.handoffs, row.requests, row.unit, row.server, row.client, row.writes)
	}
	return nil
}

// pgHotRow measures e's system s with n contenders on one key.
func pgHotRow(ctx context.Context, e *pgEnv, s pgSystem, n int) (hotGrowth, error) {
	h, err := e.pgHot(ctx, s, n, fmt.Sprintf("grow:hot:%d", n))
	if err != nil {
		return hotGrowth{}, err
	}
	row := hotGrowth{backend: backPostgres, n: n, p50: quantile(h.gaps, 0.5), acquisitions: int64(h.acquired),
		handoffs: int64(len(h.gaps)), unit: "statements", writes: -1}
	if hs := float64(len(h.gaps)); hs > 0 {
		row.requests = float64(h.stmts) / hs
		row.server = float64(h.server.Microseconds()) / hs
		row.client = float64(h.client.Microseconds()) / hs
		row.calls, row.callsWhat = map[string]float64{}, "statements"
		for k, v := range h.bySQL {
			row.calls[k] = float64(v) / hs
		}
	}
	return row, nil
}
