package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
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

// uncontended measures lock+unlock cycles of one system: g goroutines share
// one party (one client), each on a key of its own, for d. It makes one
// acquisition attempt per cycle (nobody else wants the key) with TTL ttl.
func uncontended(ctx context.Context, addr string, admin *redis.Client, sys system, g int, d, ttl time.Duration) (cell, error) {
	var rtt counter
	p, err := sys.party(clientOptions(addr), &rtt)
	if err != nil {
		return cell{}, fmt.Errorf("%s: %w", sys.name(), err)
	}
	defer p.close()
	keys := make([]string, g)
	for i := range keys {
		keys[i] = "bench:u:" + strconv.Itoa(g) + ":" + strconv.Itoa(i)
	}
	cycle := func(key string) error {
		l, err := p.lock(ctx, key, ttl, false)
		if err != nil {
			return err
		}
		return l.unlock(ctx)
	}
	// Warm up: open the connections and load the scripts.
	var wg sync.WaitGroup
	errs := make([]error, g)
	for i := range g {
		wg.Go(func() {
			for range 5 {
				if errs[i] = cycle(keys[i]); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return cell{}, fmt.Errorf("%s warm-up: %w", sys.name(), err)
	}

	m, err := startMeter(ctx, admin)
	if err != nil {
		return cell{}, err
	}
	rtt.reset()
	var stop atomic.Bool
	var ops atomic.Int64
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for i := range g {
		wg.Go(func() {
			var n int64
			for !stop.Load() {
				if errs[i] = cycle(keys[i]); errs[i] != nil {
					stop.Store(true)
					break
				}
				n++
			}
			ops.Add(n)
		})
	}
	wg.Wait()
	r, cmds := rtt.n.Load(), rtt.cmds.Load()
	if err := m.stop(ctx); err != nil {
		return cell{}, err
	}
	if err := firstErr(errs); err != nil {
		return cell{}, fmt.Errorf("%s: %w", sys.name(), err)
	}
	return cell{sys: sys.name(), n: g, ops: ops.Load(), wall: m.wall, rtt: r, cmds: cmds, m: m}, nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
