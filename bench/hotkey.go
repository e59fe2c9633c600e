package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// hotCell is one hot-key measurement.
type hotCell struct {
	cell
	handoffs  int64
	latencies []time.Duration // release -> next holder's acquire returned, per hand-off
	perParty  []int64         // acquisitions of each contender
	overlaps  int64           // times two contenders held the lock at once
	timeouts  int64           // turns that nobody else took within turnWait
	failures  int64           // lock calls that returned an error before the end
	// unfinished: the cell did not finish within its time limit (see
	// etcdCluster); it has no figures.
	unfinished bool
	skipped    bool // not run: it did not finish in an earlier repeat
}

func (h hotCell) handoffRate() float64 { return float64(h.handoffs) / h.wall.Seconds() }

// perHandoff divides x by the cell's hand-offs.
func (h hotCell) perHandoff(x float64) float64 {
	if h.handoffs == 0 || h.m == nil {
		return 0
	}
	return x / float64(h.handoffs)
}

// The cost of one hand-off: server CPU (µs; for an etcd cluster, which
// runs in this process, none), client CPU (µs), round trips, server writes.
func (h hotCell) serverCPUPerHandoff() float64 {
	if h.m == nil {
		return 0
	}
	return h.perHandoff(float64(h.m.server.cpu.Microseconds()))
}

func (h hotCell) clientCPUPerHandoff() float64 {
	if h.m == nil {
		return 0
	}
	return h.perHandoff(float64(h.m.cpu.Microseconds()))
}

func (h hotCell) rttPerHandoff() float64 { return h.perHandoff(float64(h.rtt)) }

func (h hotCell) writesPerHandoff() float64 {
	if h.m == nil {
		return 0
	}
	return h.perHandoff(float64(h.m.server.rev))
}

func (h hotCell) quantile(q float64) time.Duration {
	if len(h.latencies) == 0 {
		return 0
	}
	s := slices.Clone(h.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (h hotCell) spread() (lo, hi int64) {
	if len(h.perParty) == 0 {
		return 0, 0
	}
	return slices.Min(h.perParty), slices.Max(h.perParty)
}

// turnWait bounds how long a contender that just released waits for
// another contender to take the lock before it tries again itself.
const turnWait = time.Second

// turns lets a contender that just released wait until somebody else has
// acquired: a broadcast of the acquisition count.
type turns struct {
	mu  sync.Mutex
	gen int64
	ch  chan struct{}
}

func (t *turns) acquired() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	close(t.ch)
	t.ch = make(chan struct{})
	return t.gen
}

// waitPast waits until the acquisition count passes gen, ctx ends or
// turnWait passes; it reports whether it timed out.
func (t *turns) waitPast(ctx context.Context, gen int64) bool {
	timer := time.NewTimer(turnWait)
	defer timer.Stop()
	for {
		t.mu.Lock()
		g, ch := t.gen, t.ch
		t.mu.Unlock()
		if g > gen {
			return false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
}

// hotKey measures n contenders of one system fighting for one key for d.
// Each contender is a party of its own (its own client and connections).
// A contender loops: Lock (waiting the library's way), hold for hold, Unlock,
// then wait until another contender has acquired (at most turnWait) before
// it calls Lock again, so that a releaser never races straight back in
// ahead of the waiters and every acquisition is a real hand-off.
func hotKey(ctx context.Context, t *target, sys system, n int, d, hold, ttl time.Duration) (hotCell, error) {
	var rtt counter
	parties := make([]party, n)
	defer func() {
		for _, p := range parties {
			if p != nil {
				p.close()
			}
		}
	}()
	key := cmp.Or(t.hotPrefix, "bench:hot:") + strconv.Itoa(n)
	for i := range parties {
		p, err := sys.party(t.endpoint(4), &rtt)
		if err != nil {
			return hotCell{}, fmt.Errorf("%s: %w", sys.name(), err)
		}
		parties[i] = p
		// Warm up: connect and load scripts.
		l, err := p.lock(ctx, key, ttl, true)
		if err != nil {
			return hotCell{}, fmt.Errorf("%s warm-up: %w", sys.name(), err)
		}
		if err := l.unlock(ctx); err != nil {
			return hotCell{}, fmt.Errorf("%s warm-up: %w", sys.name(), err)
		}
	}

	m, err := startMeter(ctx, t.stats)
	if err != nil {
		return hotCell{}, err
	}
	rtt.reset()
	base := time.Now()
	var (
		holders, overlaps, timeouts, failures, handoffs atomic.Int64
		lastHolder                                      atomic.Int64
		lastRelease                                     atomic.Int64 // ns since base, -1 before the first release
		tu                                              = turns{ch: make(chan struct{})}
		mu                                              sync.Mutex
		lat                                             = make([]time.Duration, 0, 4096)
		per                                             = make([]int64, n)
		errs                                            = make([]error, n)
		wg                                              sync.WaitGroup
	)
	lastHolder.Store(-1)
	lastRelease.Store(-1)
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for i := range n {
		wg.Go(func() {
			for rctx.Err() == nil {
				l, err := parties[i].lock(rctx, key, ttl, true)
				if err != nil {
					if rctx.Err() == nil {
						failures.Add(1)
						if !errors.Is(err, context.DeadlineExceeded) {
							errs[i] = err
							return
						}
					}
					continue
				}
				now := time.Since(base)
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				gen := tu.acquired()
				per[i]++
				if prev := lastHolder.Swap(int64(i)); prev >= 0 && prev != int64(i) {
					handoffs.Add(1)
					if rel := lastRelease.Load(); rel >= 0 {
						mu.Lock()
						lat = append(lat, now-time.Duration(rel))
						mu.Unlock()
					}
				}
				if rctx.Err() == nil {
					time.Sleep(hold) // the work done under the lock
				}
				holders.Add(-1)
				lastRelease.Store(int64(time.Since(base)))
				uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				err = l.unlock(uctx)
				ucancel()
				if err != nil {
					errs[i] = fmt.Errorf("unlock: %w", err)
					return
				}
				if tu.waitPast(rctx, gen) {
					timeouts.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r, cmds := rtt.n.Load(), rtt.cmds.Load()
	if err := m.stop(ctx); err != nil {
		return hotCell{}, err
	}
	if err := firstErr(errs); err != nil {
		return hotCell{}, fmt.Errorf("%s: %w", sys.name(), err)
	}
	var ops int64
	for _, c := range per {
		ops += c
	}
	return hotCell{
		cell:      cell{sys: sys.name(), n: n, ops: ops, wall: m.wall, rtt: r, cmds: cmds, m: m},
		handoffs:  handoffs.Load(),
		latencies: lat,
		perParty:  per,
		overlaps:  overlaps.Load(),
		timeouts:  timeouts.Load(),
		failures:  failures.Load(),
	}, nil
}
