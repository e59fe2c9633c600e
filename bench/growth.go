package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Part 7, how cost grows: one Locker of each backend holding more and more
// locks (Redis from 1,000 up to a million, etcd and PostgreSQL up to what
// one server holds sensibly), and one key with more and more contenders on
// every backend. Each backend runs on servers of its own, started here.

// growthConfig says what part 7 measures.
type growthConfig struct {
	redisMax   int           // the largest number of Redis locks held (powers of ten from 1,000)
	otherMax   int           // the same for etcd and PostgreSQL
	window     time.Duration // how long each number of locks is held while measured
	ttl        time.Duration // the locks' TTL: the watchdog renews each every ttl/3
	acquire    time.Duration // bound on taking one step's locks
	contenders []int
	hot        time.Duration // one contended cell (longer with many contenders: see cell)
	backends   []string      // the backends measured, by the names of growthBackends
}

// growthBackends are part 7's backends, by the names -growth-backends
// takes, in the order they run.
var growthBackends = []string{"redis", "redlock", "etcd", "postgres"}

// setBackends sets the backends of part 7 from a comma-separated list.
func (g *growthConfig) setBackends(list string) error {
	g.backends = nil
	for _, b := range growthBackends {
		for _, w := range strings.Split(list, ",") {
			if strings.TrimSpace(w) == b {
				g.backends = append(g.backends, b)
				break
			}
		}
	}
	for _, w := range strings.Split(list, ",") {
		if !slices.Contains(growthBackends, strings.TrimSpace(w)) {
			return fmt.Errorf("unknown backend %q (part 7's are %s)", w, strings.Join(growthBackends, ","))
		}
	}
	return nil
}

func defaultGrowth() growthConfig {
	return growthConfig{
		redisMax:   1_000_000,
		otherMax:   10_000,
		window:     10 * time.Second,
		ttl:        30 * time.Second, // renewed every 10s: once per lock in the window
		acquire:    60 * time.Second,
		contenders: []int{2, 8, 32, 128, 256},
		hot:        time.Second,
		backends:   growthBackends,
	}
}

// quick shortens part 7 for a smoke test.
func (g *growthConfig) quick(set map[string]bool) {
	if !set["growth-max"] {
		g.redisMax = 10_000
	}
	if !set["growth-other-max"] {
		g.otherMax = 1_000
	}
	if !set["growth-window"] {
		g.window = 2 * time.Second
	}
	if !set["growth-ttl"] {
		g.ttl = g.window * 3 / 2 // two renewals per lock in the window
	}
	if !set["growth-hot-duration"] {
		g.hot = 400 * time.Millisecond
	}
}

func (g growthConfig) check() error {
	switch {
	case g.redisMax < 1000 || g.otherMax < 1000:
		return fmt.Errorf("-growth-max and -growth-other-max must be at least 1000")
	case g.window <= 0 || g.hot <= 0:
		return fmt.Errorf("-growth-window and -growth-hot-duration must be positive")
	case g.ttl < time.Second:
		return fmt.Errorf("-growth-ttl must be at least 1s")
	case len(g.backends) == 0:
		return fmt.Errorf("-growth-backends names no backend")
	}
	return nil
}

// cell is the length of a contended cell with n contenders: at least
// g.hot, and long enough (a fiftieth of g.hot per contender) that each
// contender takes the lock several times, so that every contender's
// first attempt, a cost per contender, is spread over many hand-offs.
func (g growthConfig) cell(n int) time.Duration {
	return max(g.hot, time.Duration(n)*g.hot/50)
}

// sizes are the numbers of locks held: powers of ten from 1,000 to max.
func sizes(top int) []int {
	var out []int
	for n := 1000; n <= top; n *= 10 {
		out = append(out, n)
	}
	return out
}

// growthRun is part 7's measurements.
type growthRun struct {
	cfg     growthConfig
	hold    time.Duration
	start   time.Time
	elapsed time.Duration
	held    []heldGrowth
	hot     []hotGrowth
	notes   []string // what did not go as planned: a step cut short, a cell unfinished
}

// The backends of part 7, by the names its tables use.
const (
	backRedis    = "dlock redislock"
	backRedlock  = "dlock redlock (5 servers)"
	backEtcd     = "dlock etcdlock"
	backPostgres = "dlock postgreslock"
)

// measureGrowth measures part 7.
func measureGrowth(ctx context.Context, cfg config) (*growthRun, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-growth-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	run := &growthRun{cfg: cfg.growth, hold: cfg.hold, start: time.Now()}
	steps := map[string]func(context.Context, config, string, *growthRun) error{
		"redis": growRedis, "redlock": growRedlock, "etcd": growEtcd, "postgres": growPostgres}
	for i, b := range cfg.growth.backends {
		step := steps[b]
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		if err := step(ctx, cfg, d, run); err != nil {
			return nil, err
		}
	}
	run.elapsed = time.Since(run.start)
	return run, nil
}

// runGrowth measures part 7 alone and writes it as its section of file.
func runGrowth(ctx context.Context, cfg config, file string) error {
	run, err := measureGrowth(ctx, cfg)
	if err != nil {
		return err
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	run.markdown(p)
	p("Written by `cd bench && go run . -growth %s` on %s; the other sections are not from this run. The goals of this part:", filepath.Base(file), run.start.UTC().Format("2006-01-02 15:04 UTC"))
	p("")
	goalRows(p, run.goals())
	dir := filepath.Dir(file)
	for name, c := range run.charts() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c.svg()), 0o644); err != nil {
			return err
		}
	}
	return replaceSection(file, growthHeading, b.String())
}
