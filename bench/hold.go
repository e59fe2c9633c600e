package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdCell is the cost of keeping many locks alive.
type holdCell struct {
	sys         string
	locks       int
	ttl         time.Duration
	acquire     time.Duration // time to take all the locks
	window      time.Duration
	cmdsPerSec  float64 // commands the client sent, per second
	callsPerSec float64 // commands Redis ran, those inside scripts included
	clientCore  float64 // client CPU over the window, in cores
	redisCore   float64 // Redis CPU over the window, in cores
	goroutines  int     // most goroutines seen during the window, less those before
	heapMiB     float64 // live heap while holding, less the live heap before
	stackMiB    float64 // goroutine stacks while holding, less those before
	lost        int     // locks reported lost or no longer on the server
	calls       map[string]int64
}

// holdMany takes n locks with one party of sys, keeps them alive for window
// the way the library is meant to be used (see held.keepAlive), and measures
// what that costs. Then it checks on the server that every lock is still
// there with its value, and releases them.
func holdMany(ctx context.Context, t *target, admin *redis.Client, sys system, n int, window, ttl time.Duration) (holdCell, error) {
	res := holdCell{sys: sys.name(), locks: n, ttl: ttl}
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()

	var rtt counter
	p, err := sys.party(t.endpoint(0), &rtt)
	if err != nil {
		return res, fmt.Errorf("%s: %w", sys.name(), err)
	}
	defer p.close()
	locks := make([]held, n)
	t0 := time.Now()
	if err := parallel(64, n, func(i int) error {
		var (
			l   held
			err error
		)
		for range 3 { // a timeout under load is worth another try
			if l, err = p.lock(ctx, "bench:hold:"+strconv.Itoa(i), ttl, false); err == nil || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			return err
		}
		l.keepAlive(ttl)
		locks[i] = l
		return nil
	}); err != nil {
		parallel(64, n, func(i int) error {
			if locks[i] != nil {
				locks[i].unlock(ctx)
			}
			return nil
		})
		return res, fmt.Errorf("%s: acquire: %w", sys.name(), err)
	}
	res.acquire = time.Since(t0)

	// The window measures keeping the locks alive, not the garbage of taking
	// them or the memory an earlier system left to give back.
	debug.FreeOSMemory()
	m, err := startMeter(ctx, t.stats)
	if err != nil {
		return res, err
	}
	rtt.reset()
	deadline := time.Now().Add(window)
	tick := time.NewTicker(window / 20)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			tick.Stop()
			return res, ctx.Err()
		case <-tick.C:
		}
		res.goroutines = max(res.goroutines, runtime.NumGoroutine()-g0)
	}
	tick.Stop()
	cmds := rtt.cmds.Load()
	if err := m.stop(ctx); err != nil {
		return res, err
	}
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	res.window = m.wall
	res.calls = m.server.calls
	res.cmdsPerSec = float64(cmds+m.server.subscriptions()) / m.wall.Seconds()
	res.callsPerSec = float64(m.server.total()) / m.wall.Seconds()
	res.clientCore = m.cpu.Seconds() / m.wall.Seconds()
	res.redisCore = m.server.cpu.Seconds() / m.wall.Seconds()
	res.heapMiB = (float64(ms1.HeapInuse) - float64(ms0.HeapInuse)) / (1 << 20)
	res.stackMiB = (float64(ms1.StackInuse) - float64(ms0.StackInuse)) / (1 << 20)

	// Which locks are still held, according to the library and the server?
	lost := make([]bool, n)
	for i, l := range locks {
		lost[i] = l.lost()
	}
	for lo := 0; lo < n; lo += 1000 {
		hi := min(n, lo+1000)
		cmds := make([]*redis.StringCmd, 0, hi-lo)
		_, err := admin.Pipelined(ctx, func(pp redis.Pipeliner) error {
			for _, l := range locks[lo:hi] {
				cmds = append(cmds, pp.Get(ctx, l.redisKey()))
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return res, fmt.Errorf("check: %w", err)
		}
		for j, c := range cmds {
			// A library that keeps its value to itself gives "": the key
			// must then hold some value.
			v, err := c.Result()
			if want := locks[lo+j].value(); err != nil || (want != "" && v != want) {
				lost[lo+j] = true
			}
		}
	}
	for _, l := range lost {
		if l {
			res.lost++
		}
	}
	var mu sync.Mutex
	var unlockErrs int
	parallel(64, n, func(i int) error {
		if err := locks[i].unlock(ctx); err != nil {
			mu.Lock()
			unlockErrs++
			mu.Unlock()
		}
		return nil
	})
	if unlockErrs > res.lost {
		return res, fmt.Errorf("%s: %d unlocks failed, %d locks lost", sys.name(), unlockErrs, res.lost)
	}
	return res, nil
}

// parallel runs fn(0..n-1) on w goroutines and returns the first error; it
// stops handing out work after an error.
func parallel(w, n int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(w, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if stop || i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}
