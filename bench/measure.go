package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// config says what to measure and for how long.
type config struct {
	duration    time.Duration // one uncontended cell
	slices      int           // the uncontended cell is measured in this many interleaved slices
	hotDuration time.Duration // one hot-key cell
	repeats     int
	hotRepeats  int
	goroutines  []int
	contenders  []int
	ttl         time.Duration // TTL of parts 1 and 2
	hold        time.Duration // hot-key hold time
	holdLocks   int
	holdWindow  time.Duration
	holdTTL     time.Duration
	log         io.Writer
}

func defaultConfig() config {
	return config{
		duration: 500 * time.Millisecond,
		// 25ms each: finer turns cancel more of the machine's drift (the
		// per-repeat ratio of one goroutine spread 0.73–1.21 in 5 slices,
		// 0.91–1.17 in 20)
		slices:      20,
		hotDuration: 3 * time.Second,
		repeats:     15,
		hotRepeats:  3,
		goroutines:  []int{1, 8, 64},
		contenders:  []int{2, 8, 32},
		ttl:         10 * time.Second,
		hold:        2 * time.Millisecond,
		holdLocks:   10000,
		holdWindow:  10 * time.Second,
		holdTTL:     dlock.DefaultTTL,
	}
}

// quick shortens what the caller did not set explicitly.
func (c *config) quick(set map[string]bool) {
	if !set["duration"] {
		c.duration = 150 * time.Millisecond
	}
	if !set["hot-duration"] {
		c.hotDuration = 400 * time.Millisecond
	}
	if !set["repeats"] {
		c.repeats = 1
	}
	if !set["hot-repeats"] {
		c.hotRepeats = 1
	}
	if !set["hold-locks"] {
		c.holdLocks = 1000
	}
	if !set["hold-window"] {
		c.holdWindow = 2 * time.Second
	}
	if !set["hold-ttl"] {
		c.holdTTL = 1500 * time.Millisecond
	}
}

func (c *config) check() error {
	switch {
	case c.duration <= 0 || c.hotDuration <= 0 || c.holdWindow <= 0:
		return errors.New("durations must be positive")
	case c.repeats < 1 || c.hotRepeats < 1:
		return errors.New("repeats must be at least 1")
	case c.slices < 1:
		return errors.New("slices must be at least 1")
	case c.hold < 0:
		return errors.New("-hold must not be negative")
	case c.holdLocks < 1:
		return errors.New("-hold-locks must be at least 1")
	case c.holdTTL < 30*time.Millisecond:
		return errors.New("-hold-ttl must be at least 30ms")
	}
	return nil
}

func (c *config) logf(format string, args ...any) {
	if c.log != nil {
		fmt.Fprintf(c.log, format+"\n", args...)
	}
}

// results holds every cell of one run.
type results struct {
	cfg        config
	start      time.Time
	elapsed    time.Duration
	redis      string
	load       [2]string // /proc/loadavg at the start and at the end
	uncont     []cell
	hot        []hotCell
	holds      []holdCell
	uSystems   []string
	hotSystems []string
}

// The systems of each part. dlockSystems adds dlock's variants.
func uncontendedSystems() []system {
	return append([]system{floor{}, bsmSys{}, redsyncSys{}}, dlockSystems(partUncontended)...)
}

func hotSystems() []system {
	return append([]system{bsmSys{interval: 100 * time.Millisecond}, bsmSys{interval: time.Millisecond}, redsyncSys{}},
		dlockSystems(partHot)...)
}

func holdSystems() []system {
	return append([]system{bsmSys{}, redsyncSys{}}, dlockSystems(partHold)...)
}

// The parts, for dlockSystems.
const (
	partUncontended = iota
	partHot
	partHold
)

// measure starts a redis-server and runs every part.
func measure(ctx context.Context, cfg config) (*results, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.New(dir, redistest.Config{})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	admin := redis.NewClient(clientOptions(srv.Addr()))
	defer admin.Close()
	res := &results{cfg: cfg, start: time.Now(), redis: redisVersion(ctx, admin)}
	res.load[0] = loadAvg()
	cfg.logf("redis-server %s on %s", res.redis, srv.Addr())

	us := uncontendedSystems()
	for _, s := range us {
		res.uSystems = append(res.uSystems, s.name())
	}
	for r := range cfg.repeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, srv.Addr(), admin, rotate(us, r), g, cfg.duration, cfg.ttl, cfg.slices)
			if err != nil {
				return nil, fmt.Errorf("uncontended: %w", err)
			}
			for _, c := range cells {
				cfg.logf("uncontended  repeat %d  %3d goroutines  %-24s %8.0f cycles/s  %5.1f allocs/cycle", r+1, g, c.sys, c.rate(), c.allocsPer())
			}
			res.uncont = append(res.uncont, cells...)
		}
	}

	hs := hotSystems()
	for _, s := range hs {
		res.hotSystems = append(res.hotSystems, s.name())
	}
	for r := range cfg.hotRepeats {
		for _, n := range cfg.contenders {
			for _, s := range rotate(hs, r) {
				c, err := hotKey(ctx, srv.Addr(), admin, s, n, cfg.hotDuration, cfg.hold, cfg.ttl)
				if err != nil {
					return nil, fmt.Errorf("hot key: %w", err)
				}
				lo, hi := c.spread()
				cfg.logf("hot key      repeat %d  %3d contenders  %-24s %6.0f acq/s  %6.0f hand-offs/s  p50 %v  p99 %v  spread %d-%d  rtt/acq %.1f",
					r+1, n, c.sys, c.rate(), c.handoffRate(), c.quantile(0.5).Round(time.Microsecond), c.quantile(0.99).Round(time.Microsecond), lo, hi, c.rttPer())
				res.hot = append(res.hot, c)
			}
		}
	}

	for _, s := range holdSystems() {
		c, err := holdMany(ctx, srv.Addr(), admin, s, cfg.holdLocks, cfg.holdWindow, cfg.holdTTL)
		if err != nil {
			return nil, fmt.Errorf("held locks: %w", err)
		}
		cfg.logf("held locks   %d  %-24s %7.0f cmds/s  %.3f client cores  %d goroutines  %.1f MiB heap  %d lost  %v",
			c.locks, c.sys, c.cmdsPerSec, c.clientCore, c.goroutines, c.heapMiB, c.lost, c.calls)
		res.holds = append(res.holds, c)
	}
	res.elapsed = time.Since(res.start)
	res.load[1] = loadAvg()
	return res, nil
}

// rotate returns s started at its r-th element, so that no system always
// runs first or right after the same neighbour.
func rotate(s []system, r int) []system {
	r %= len(s)
	return append(append([]system{}, s[r:]...), s[:r]...)
}
