package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	parts       []string // the parts to run, in allParts' order

	// Part 6, the primitives: its repeats (its cells are part 1's and
	// part 2's).
	primRepeats int

	// Part 5, etcd: the cluster sizes, and cells of their own (an etcd
	// cycle is a Raft write, some ten times a Redis round trip).
	etcdMembers     []int
	etcdDuration    time.Duration
	etcdSlices      int
	etcdRepeats     int
	etcdHotDuration time.Duration
	etcdContenders  []int
	// etcdGrace is how long an etcd hot-key cell may take beyond its
	// duration (starting the contenders, stopping them, reading the
	// revision) before it is given up as unfinished: a cluster swamped by a
	// system's requests can take minutes to answer, and the run must end.
	etcdGrace time.Duration

	growth growthConfig // part 7

	log io.Writer
}

// The parts, by the names the -parts flag takes.
const (
	nameUncontended = "uncontended"
	nameHot         = "hotkey"
	nameHold        = "held"
	namePrims       = "primitives"
	nameEtcd        = "etcd"
	nameRedlock     = "redlock"
	nameGrowth      = "growth"
)

var allParts = []string{nameUncontended, nameHot, nameHold, namePrims, nameEtcd, nameRedlock, nameGrowth}

func (c *config) runs(part string) bool { return slices.Contains(c.parts, part) }

// setParts sets the parts from a comma-separated list.
func (c *config) setParts(list string) error {
	want := strings.Split(list, ",")
	c.parts = nil
	for _, w := range want {
		if !slices.Contains(allParts, strings.TrimSpace(w)) {
			return fmt.Errorf("unknown part %q (the parts are %s)", w, strings.Join(allParts, ","))
		}
	}
	for _, p := range allParts {
		if slices.ContainsFunc(want, func(w string) bool { return strings.TrimSpace(w) == p }) {
			c.parts = append(c.parts, p)
		}
	}
	return nil
}

func defaultConfig() config {
	return config{
		duration: 400 * time.Millisecond,
		// 20ms each: finer turns cancel more of the machine's drift (the
		// per-repeat ratio of one goroutine spread 0.73–1.21 in 5 slices,
		// 0.91–1.17 in 20)
		slices:      20,
		hotDuration: time.Second,
		repeats:     7,
		hotRepeats:  3,
		goroutines:  []int{1, 8, 64},
		contenders:  []int{2, 8, 32},
		ttl:         10 * time.Second,
		hold:        2 * time.Millisecond,
		holdLocks:   10000,
		holdWindow:  20 * time.Second / 3, // two renewal periods of the TTL
		holdTTL:     dlock.DefaultTTL,
		parts:       allParts,
		primRepeats: 3,

		etcdMembers:     []int{1, 3},
		etcdDuration:    600 * time.Millisecond,
		etcdSlices:      3,
		etcdRepeats:     3,
		etcdHotDuration: time.Second,
		etcdContenders:  []int{8, 32},
		etcdGrace:       8 * time.Second,

		growth: defaultGrowth(),
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
	if !set["prims-repeats"] {
		c.primRepeats = 1
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
	if !set["etcd-duration"] {
		c.etcdDuration = 200 * time.Millisecond
	}
	if !set["etcd-hot-duration"] {
		c.etcdHotDuration = 400 * time.Millisecond
	}
	if !set["etcd-repeats"] {
		c.etcdRepeats = 1
	}
	c.growth.quick(set)
}

func (c *config) check() error {
	switch {
	case c.duration <= 0 || c.hotDuration <= 0 || c.holdWindow <= 0 || c.etcdDuration <= 0 || c.etcdHotDuration <= 0:
		return errors.New("durations must be positive")
	case c.repeats < 1 || c.hotRepeats < 1 || c.etcdRepeats < 1:
		return errors.New("repeats must be at least 1")
	case c.primRepeats < 1:
		return errors.New("-prims-repeats must be at least 1")
	case c.slices < 1 || c.etcdSlices < 1:
		return errors.New("slices must be at least 1")
	case len(c.parts) == 0:
		return errors.New("-parts names no part")
	case c.hold < 0:
		return errors.New("-hold must not be negative")
	case c.holdLocks < 1:
		return errors.New("-hold-locks must be at least 1")
	case c.holdTTL < 30*time.Millisecond:
		return errors.New("-hold-ttl must be at least 30ms")
	}
	return c.growth.check()
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
	etcd       []etcdRun
	eSystems   []string

	prims          []cell // part 6
	primsHot       []hotCell
	primSystems    []string
	primHotSystems []string

	redlock *redlockRun // written to REDLOCK.md beside the results
	growth  *growthRun  // part 7
}

// etcdRun is part 5 on one cluster.
type etcdRun struct {
	members int
	uncont  []cell
	hot     []hotCell
}

// The systems of each part. dlockSystems adds dlock's variants.
func uncontendedSystems() []system {
	return append(append(floorSystems(), bsmSys{}, redsyncSys{}, rueidisLockSys{}), dlockSystems(partUncontended)...)
}

func hotSystems() []system {
	return append([]system{bsmSys{interval: 100 * time.Millisecond}, bsmSys{interval: time.Millisecond}, redsyncSys{}, rueidisLockSys{}},
		dlockSystems(partHot)...)
}

func holdSystems() []system {
	return append([]system{bsmSys{}, redsyncSys{}, rueidisLockSys{}}, dlockSystems(partHold)...)
}

// The parts, for dlockSystems.
const (
	partUncontended = iota
	partHot
	partHold
)

// measure runs the parts of cfg: the Redis parts on one redis-server, the
// etcd part on embedded etcd clusters, each started here.
func measure(ctx context.Context, cfg config) (*results, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &results{cfg: cfg, start: time.Now()}
	res.load[0] = loadAvg()
	if cfg.runs(nameUncontended) || cfg.runs(nameHot) || cfg.runs(nameHold) || cfg.runs(namePrims) {
		if err := measureRedis(ctx, cfg, dir, res); err != nil {
			return nil, err
		}
	}
	if cfg.runs(nameEtcd) {
		if err := measureEtcd(ctx, cfg, dir, res); err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
	}
	if cfg.runs(nameRedlock) {
		if res.redlock, err = measureRedlock(ctx, cfg); err != nil {
			return nil, fmt.Errorf("redlock: %w", err)
		}
	}
	if cfg.runs(nameGrowth) {
		if res.growth, err = measureGrowth(ctx, cfg); err != nil {
			return nil, fmt.Errorf("growth: %w", err)
		}
	}
	res.elapsed = time.Since(res.start)
	res.load[1] = loadAvg()
	return res, nil
}

// measureRedis starts a redis-server and runs the Redis parts of cfg.
func measureRedis(ctx context.Context, cfg config, dir string, res *results) error {
	srv, err := redistest.New(dir, redistest.Config{})
	if err != nil {
		return err
	}
	defer srv.Close()
	admin := redis.NewClient(clientOptions(srv.Addr()))
	defer admin.Close()
	t := redisTarget(srv.Addr(), admin)
	res.redis = redisVersion(ctx, admin)
	cfg.logf("redis-server %s on %s", res.redis, srv.Addr())

	if cfg.runs(nameUncontended) {
		us := uncontendedSystems()
		res.uSystems = names(us)
		if res.uncont, err = uncontendedCells(ctx, cfg, t, us, cfg.repeats, nameUncontended); err != nil {
			return err
		}
	}

	if cfg.runs(nameHot) {
		hs := hotSystems()
		res.hotSystems = names(hs)
		if res.hot, err = hotCells(ctx, cfg, t, hs, cfg.hotRepeats, cfg.contenders); err != nil {
			return fmt.Errorf("hot key: %w", err)
		}
	}

	if cfg.runs(nameHold) {
		for _, s := range holdSystems() {
			c, err := holdMany(ctx, t, admin, s, cfg.holdLocks, cfg.holdWindow, cfg.holdTTL)
			if err != nil {
				return fmt.Errorf("held locks: %w", err)
			}
			cfg.logf("held locks   %d  %-24s %7.0f cmds/s  %.3f client cores  %d goroutines  %.1f MiB heap  %d lost  %v",
				c.locks, c.sys, c.cmdsPerSec, c.clientCore, c.goroutines, c.heapMiB, c.lost, c.calls)
			res.holds = append(res.holds, c)
		}
	}

	if cfg.runs(namePrims) {
		return measurePrims(ctx, cfg, t, res)
	}
	return nil
}

// uncontendedCells measures repeats of part 1's cells of systems on t, at
// each number of goroutines of cfg, and logs them under label.
func uncontendedCells(ctx context.Context, cfg config, t *target, systems []system, repeats int, label string) ([]cell, error) {
	var all []cell
	for r := range repeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, t, rotate(systems, r), g, cfg.duration, cfg.ttl, cfg.slices, false)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", label, err)
			}
			for _, c := range cells {
				cfg.logf("%-12s repeat %d  %3d goroutines  %-28s %8.0f cycles/s  %5.1f allocs/cycle  %.2f rtt/cycle", label, r+1, g, c.sys, c.rate(), c.allocsPer(), c.rttPer())
			}
			all = append(all, cells...)
		}
	}
	return all, nil
}

// hotCells measures repeats of part 2's cells of systems on t, with each
// number of contenders.
func hotCells(ctx context.Context, cfg config, t *target, systems []system, repeats int, contenders []int) ([]hotCell, error) {
	var all []hotCell
	for r := range repeats {
		for _, n := range contenders {
			for _, s := range rotate(systems, r) {
				c, err := hotKey(ctx, t, s, n, cfg.hotDuration, cfg.hold, cfg.ttl)
				if err != nil {
					return nil, err
				}
				logHot(cfg, r, c)
				all = append(all, c)
			}
		}
	}
	return all, nil
}

// names are the names of systems.
func names(systems []system) []string {
	var n []string
	for _, s := range systems {
		n = append(n, s.name())
	}
	return n
}

func logHot(cfg config, r int, c hotCell) {
	lo, hi := c.spread()
	cfg.logf("hot key      repeat %d  %3d contenders  %-28s %6.0f acq/s  %6.0f hand-offs/s  p50 %v  p99 %v  spread %d-%d  rtt/acq %.1f  writes/acq %.2f",
		r+1, c.n, c.sys, c.rate(), c.handoffRate(), c.quantile(0.5).Round(time.Microsecond), c.quantile(0.99).Round(time.Microsecond), lo, hi, c.rttPer(), c.writesPer())
}

// measureEtcd runs part 5 on an embedded etcd cluster of each size.
func measureEtcd(ctx context.Context, cfg config, dir string, res *results) error {
	es := etcdSystems()
	for _, s := range es {
		res.eSystems = append(res.eSystems, s.name())
	}
	for _, members := range cfg.etcdMembers {
		run, err := etcdCluster(ctx, cfg, fmt.Sprintf("%s/etcd%d", dir, members), members, es)
		if err != nil {
			return err
		}
		res.etcd = append(res.etcd, run)
	}
	return nil
}

func etcdCluster(ctx context.Context, cfg config, dir string, members int, es []system) (etcdRun, error) {
	run := etcdRun{members: members}
	c, err := etcdtest.New(dir, members)
	if err != nil {
		return run, err
	}
	defer c.Close()
	admin, err := clientv3.New(etcdtest.ClientConfig(c.Endpoints()...))
	if err != nil {
		return run, err
	}
	defer admin.Close()
	t := etcdTarget(c, admin)
	cfg.logf("etcd: %d member(s) on %v", members, c.Endpoints())
	type hotID struct {
		sys string
		n   int
	}
	gaveUp := map[hotID]bool{}
	for r := range cfg.etcdRepeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, t, rotate(es, r), g, cfg.etcdDuration, cfg.ttl, cfg.etcdSlices, true)
			if err != nil {
				return run, fmt.Errorf("uncontended: %w", err)
			}
			for _, c := range cells {
				cfg.logf("etcd %d      repeat %d  %3d goroutines  %-28s %8.0f cycles/s  %.2f rtt/cycle  %.2f writes/cycle", members, r+1, g, c.sys, c.rate(), c.rttPer(), c.writesPer())
			}
			run.uncont = append(run.uncont, cells...)
		}
		for _, n := range cfg.etcdContenders {
			for _, s := range rotate(es, r) {
				if gaveUp[hotID{s.name(), n}] {
					// It did not finish before: another try would only
					// add its time limit to the run.
					run.hot = append(run.hot, hotCell{cell: cell{sys: s.name(), n: n}, unfinished: true, skipped: true})
					continue
				}
				h, err := boundedHotKey(ctx, cfg, t, s, n)
				if err != nil {
					return run, fmt.Errorf("hot key: %w", err)
				}
				if h.unfinished {
					gaveUp[hotID{s.name(), n}] = true
					cfg.logf("hot key      repeat %d  %3d contenders  %-28s did not finish within %v", r+1, n, s.name(), cfg.etcdHotDuration+cfg.etcdGrace)
				} else {
					logHot(cfg, r, h)
				}
				run.hot = append(run.hot, h)
			}
		}
	}
	return run, nil
}

// boundedHotKey is hotKey on etcd within cfg.etcdGrace of the cell's
// duration.
// A cell that does not finish in time is returned marked unfinished, after
// the cluster answers again.
func boundedHotKey(ctx context.Context, cfg config, t *target, s system, n int) (hotCell, error) {
	hctx, cancel := context.WithTimeout(ctx, cfg.etcdHotDuration+cfg.etcdGrace)
	h, err := hotKey(hctx, t, s, n, cfg.etcdHotDuration, cfg.hold, cfg.ttl)
	cancel()
	if err == nil || ctx.Err() != nil || hctx.Err() == nil {
		return h, err
	}
	h = hotCell{cell: cell{sys: s.name(), n: n}, unfinished: true}
	// The parties are closed: wait until the cluster answers again.
	deadline := time.Now().Add(time.Minute)
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := t.stats(sctx)
		cancel()
		switch {
		case err == nil:
			return h, nil
		case ctx.Err() != nil:
			return h, ctx.Err()
		case time.Now().After(deadline):
			return h, fmt.Errorf("the cluster did not answer for a minute after %s: %w", s.name(), err)
		}
	}
}

// rotate returns s started at its r-th element, so that no system always
// runs first or right after the same neighbour.
func rotate(s []system, r int) []system {
	r %= len(s)
	return append(append([]system{}, s[r:]...), s[:r]...)
}
