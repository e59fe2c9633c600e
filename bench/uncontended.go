package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// cell is one measurement: one system, one level of concurrency, one repeat.
type cell struct {
	sys  string
	n    int // goroutines or contenders
	ops  int64
	wall time.Duration
	rtt  int64 // client round trips
	cmds int64 // commands the clients sent (pub/sub subscriptions apart)
	m    *meter
}

func (c cell) rate() float64 { return float64(c.ops) / c.wall.Seconds() }

func (c cell) per(x float64) float64 {
	if c.ops == 0 {
		return 0
	}
	return x / float64(c.ops)
}

func (c cell) allocsPer() float64    { return c.per(float64(c.m.allocs)) }
func (c cell) cmdsPer() float64      { return c.per(float64(c.cmds + c.m.server.subscriptions())) }
func (c cell) callsPer() float64     { return c.per(float64(c.m.server.total())) }
func (c cell) rttPer() float64       { return c.per(float64(c.rtt)) }
func (c cell) redisCPUPer() float64  { return c.per(float64(c.m.server.cpu.Microseconds())) }
func (c cell) clientCPUPer() float64 { return c.per(float64(c.m.cpu.Microseconds())) }
func (c cell) writesPer() float64    { return c.per(float64(c.m.server.rev)) }

// A runner measures lock+unlock cycles of one system: g goroutines share
// one party (one client), each on a key of its own, making one acquisition
// attempt per cycle (nobody else wants the key) with TTL ttl. It stays
// open between runs, so that a cell can be measured in slices interleaved
// with the other systems' slices.
type runner struct {
	sys  system
	p    party
	rtt  *counter
	keys []string
	ttl  time.Duration
	t    *target
}

// openRunner makes the party and warms it up with warm cycles on each
// goroutine: it opens the connections and loads the scripts.
func openRunner(ctx context.Context, t *target, sys system, g int, ttl time.Duration, warm int) (*runner, error) {
	rtt := &counter{}
	p, err := sys.party(t.endpoint(0), rtt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sys.name(), err)
	}
	r := &runner{sys: sys, p: p, rtt: rtt, keys: make([]string, g), ttl: ttl, t: t}
	for i := range r.keys {
		r.keys[i] = "bench:u:" + strconv.Itoa(g) + ":" + strconv.Itoa(i)
	}
	if err := r.each(func(key string, _ *atomic.Bool) (int64, error) {
		for range warm {
			if err := r.cycle(ctx, key); err != nil {
				return 0, err
			}
		}
		return int64(warm), nil
	}, nil); err != nil {
		p.close()
		return nil, fmt.Errorf("%s warm-up: %w", sys.name(), err)
	}
	return r, nil
}

func (r *runner) cycle(ctx context.Context, key string) error {
	l, err := r.p.lock(ctx, key, r.ttl, false)
	if err != nil {
		return err
	}
	return l.unlock(ctx)
}

// each runs f on every key in a goroutine of its own, adds up the cycles
// they report into ops (when not nil) and returns the first error.
func (r *runner) each(f func(key string, stop *atomic.Bool) (int64, error), ops *atomic.Int64) error {
	var (
		wg   sync.WaitGroup
		stop atomic.Bool
	)
	errs := make([]error, len(r.keys))
	for i, key := range r.keys {
		wg.Go(func() {
			n, err := f(key, &stop)
			if err != nil {
				errs[i] = err
				stop.Store(true)
			}
			if ops != nil {
				ops.Add(n)
			}
		})
	}
	wg.Wait()
	return firstErr(errs)
}

// run measures cycles for d.
func (r *runner) run(ctx context.Context, d time.Duration) (cell, error) {
	m, err := startMeter(ctx, r.t.stats)
	if err != nil {
		return cell{}, err
	}
	r.rtt.reset()
	var ops atomic.Int64
	var over atomic.Bool
	timer := time.AfterFunc(d, func() { over.Store(true) })
	defer timer.Stop()
	err = r.each(func(key string, stop *atomic.Bool) (int64, error) {
		var n int64
		for !over.Load() && !stop.Load() {
			if err := r.cycle(ctx, key); err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}, &ops)
	rtt, cmds := r.rtt.n.Load(), r.rtt.cmds.Load()
	if err := m.stop(ctx); err != nil {
		return cell{}, err
	}
	if err != nil {
		return cell{}, fmt.Errorf("%s: %w", r.sys.name(), err)
	}
	return cell{sys: r.sys.name(), n: len(r.keys), ops: ops.Load(), wall: m.wall, rtt: rtt, cmds: cmds, m: m}, nil
}

func (r *runner) close() error { return r.p.close() }

// add sums the slice o into c.
func (c *cell) add(o cell) {
	if c.m == nil {
		*c = o
		return
	}
	c.ops += o.ops
	c.wall += o.wall
	c.rtt += o.rtt
	c.cmds += o.cmds
	c.m.add(o.m)
}

// uncontendedRepeat measures one repeat of every system at g goroutines:
// each system's cell is made of slices slices of d/slices, interleaved with
// the other systems' in the order order, so that every system sees the
// same machine (this one is shared, and its load changes by the second).
// The runners stay open through the repeat, unless reopen: then each is
// opened for its slice alone, so that no system's background work runs
// during another's slice (the etcd part: its server shares this process).
func uncontendedRepeat(ctx context.Context, t *target, order []system, g int, d, ttl time.Duration, slices int, reopen bool) ([]cell, error) {
	runners := make([]*runner, len(order))
	defer func() {
		for _, r := range runners {
			if r != nil {
				r.close()
			}
		}
	}()
	open := func(i int) error {
		if runners[i] != nil {
			return nil
		}
		warm := 5
		if reopen {
			warm = 1 // a connection and a session, no more: it is done at every slice
		}
		r, err := openRunner(ctx, t, order[i], g, ttl, warm)
		runners[i] = r
		return err
	}
	if !reopen {
		for i := range order {
			if err := open(i); err != nil {
				return nil, err
			}
		}
	}
	cells := make([]cell, len(order))
	for k := range slices {
		for j := range order {
			i := (j + k) % len(order) // rotate the order in every slice too
			if err := open(i); err != nil {
				return nil, err
			}
			c, err := runners[i].run(ctx, d/time.Duration(slices))
			if err != nil {
				return nil, err
			}
			cells[i].add(c)
			if reopen {
				err := runners[i].close()
				runners[i] = nil
				if err != nil {
					return nil, fmt.Errorf("%s: close: %w", order[i].name(), err)
				}
			}
		}
	}
	return cells, nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
