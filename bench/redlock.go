package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redlock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// The Redlock part (-redlock): dlock's redlock package beside redsync on
// the same five independent redis-servers, and the single-node dlock
// figure on the first of them for reference.

// redlockNodes is the number of servers of the Redlock part.
const redlockNodes = 5

// multiOptions returns a copy of opts for each address.
func multiOptions(opts *goredislib.Options, addrs []string) []*goredislib.Options {
	out := make([]*goredislib.Options, len(addrs))
	for i, a := range addrs {
		o := *opts
		o.Addr = a
		out[i] = &o
	}
	return out
}

// redlockSys is dlock's redlock over the servers of addrs: watchdog on,
// waiters woken by the releases, fences always.
type redlockSys struct{ addrs []string }

func (redlockSys) name() string { return "dlock redlock" }

func (s redlockSys) party(e endpoint, rtt *counter) (party, error) {
	var cs []goredislib.UniversalClient
	for _, o := range multiOptions(e.redis, s.addrs) {
		o.ContextTimeoutEnabled = true
		cs = append(cs, newClient(o, rtt))
	}
	// A per-node timeout that a loaded 2-core machine with 64 goroutines
	// keeps: redsync's is the clients' read timeout.
	l, err := redlock.New(cs, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	return &redlockParty{l: l, cs: cs}, nil
}

type redlockParty struct {
	l  *redlock.Locker
	cs []goredislib.UniversalClient
}

func (p *redlockParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var (
		lk  dlock.Lock
		err error
	)
	if wait {
		lk, err = p.l.Lock(ctx, key, dlock.WithTTL(ttl))
	} else {
		lk, err = p.l.TryLock(ctx, key, dlock.WithTTL(ttl))
	}
	if err != nil {
		return nil, err
	}
	return &dlockLock{lk: lk}, nil
}

func (p *redlockParty) close() error {
	err := p.l.Close()
	for _, c := range p.cs {
		c.Close()
	}
	return err
}

// redsyncMultiSys is redsync over one pool per server, its Redlock form,
// with its defaults.
type redsyncMultiSys struct{ addrs []string }

func (redsyncMultiSys) name() string { return "redsync" }

func (s redsyncMultiSys) party(e endpoint, rtt *counter) (party, error) {
	var (
		pools []redis.Pool
		cs    []*goredislib.Client
	)
	for _, o := range multiOptions(e.redis, s.addrs) {
		c := newClient(o, rtt)
		cs = append(cs, c)
		pools = append(pools, goredis.NewPool(c))
	}
	return &redsyncMultiParty{redsyncParty: redsyncParty{c: cs[0], rs: redsync.New(pools...)}, cs: cs}, nil
}

type redsyncMultiParty struct {
	redsyncParty
	cs []*goredislib.Client
}

func (p *redsyncMultiParty) close() error {
	for _, c := range p.cs {
		c.Close()
	}
	return nil
}

// runRedlock measures the Redlock part and writes its report to out.
func runRedlock(ctx context.Context, cfg config, out string) error {
	dir, err := os.MkdirTemp("", "dlock-bench-redlock-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var addrs []string
	for i := range redlockNodes {
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		srv, err := redistest.New(d, redistest.Config{})
		if err != nil {
			return err
		}
		defer srv.Close()
		addrs = append(addrs, srv.Addr())
	}
	admin := goredislib.NewClient(clientOptions(addrs[0]))
	defer admin.Close()
	first := redisTarget(addrs[0], admin)
	version := redisVersion(ctx, admin)
	cfg.logf("redis-server %s on %s", version, strings.Join(addrs, ", "))
	start := time.Now()

	multi := []system{redlockSys{addrs}, redsyncMultiSys{addrs}}
	var uncont []cell
	for r := range cfg.repeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, first, rotate(multi, r), g, cfg.duration, cfg.ttl, cfg.slices, false)
			if err != nil {
				return fmt.Errorf("redlock uncontended: %w", err)
			}
			for _, c := range cells {
				cfg.logf("redlock uncontended  repeat %d  %3d goroutines  %-16s %8.0f cycles/s  %5.1f requests/cycle", r+1, g, c.sys, c.rate(), c.rttPer())
			}
			uncont = append(uncont, cells...)
		}
	}
	hotSys := append(multi, dlockSys{}) // dlockSys: one server, the first
	var hot []hotCell
	for r := range cfg.hotRepeats {
		for _, n := range []int{8, 32} {
			for _, s := range rotate(hotSys, r) {
				c, err := hotKey(ctx, first, s, n, cfg.hotDuration, cfg.hold, cfg.ttl)
				if err != nil {
					return fmt.Errorf("redlock hot key: %w", err)
				}
				cfg.logf("redlock hot key      repeat %d  %3d contenders  %-16s %6.0f acq/s  p50 %v  p99 %v  requests/acq %.1f",
					r+1, n, c.sys, c.rate(), c.quantile(0.5).Round(time.Microsecond), c.quantile(0.99).Round(time.Microsecond), c.rttPer())
				hot = append(hot, c)
			}
		}
	}

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Redlock: dlock's redlock beside redsync on %d redis-servers", redlockNodes)
	p("")
	p("Measured %s in %v by `go run ./bench -redlock` (%d repeats of every cell: median (min–max)), redis-server %s,",
		start.Format("2006-01-02"), time.Since(start).Round(time.Second), cfg.repeats, version)
	p("%d independent servers on loopback, on %s. Each party has its own client per server; a request is", redlockNodes, cpuModel())
	p("one command to one server (the %d of one acquisition go out at once).", redlockNodes)
	p("")
	p("## Uncontended lock+unlock, cycles per second")
	p("")
	p("| goroutines | dlock redlock | redsync | ratio | requests/cycle (redlock, redsync) |")
	p("|---:|---:|---:|---:|---|")
	for _, g := range cfg.goroutines {
		a := cellsOf(uncont, ukey, "dlock redlock", g)
		r := cellsOf(uncont, ukey, "redsync", g)
		sa, sr := collect(a, cell.rate), collect(r, cell.rate)
		p("| %d | %s | %s | %.2f× | %.1f, %.1f |", g, fmtStat(sa, f0), fmtStat(sr, f0), sa.med/sr.med,
			collect(a, cell.rttPer).med, collect(r, cell.rttPer).med)
	}
	p("")
	p("## One hot key: hand-off latency and requests per acquisition")
	p("")
	p("Each contender is a party of its own; after a release it waits until another has taken the lock, so")
	p("every acquisition is a hand-off (see RESULTS.md, part 2). \"dlock (one server)\" is the single-node")
	p("driver on the first server, for reference.")
	p("")
	p("| contenders | system | acquisitions/s | hand-off p50 | hand-off p99 | requests/acquisition |")
	p("|---:|---|---:|---:|---:|---:|")
	for _, n := range []int{8, 32} {
		for _, s := range hotSys {
			cs := cellsOf(hot, hkey, s.name(), n)
			name := s.name()
			if _, ok := s.(dlockSys); ok {
				name = "dlock (one server)"
			}
			p("| %d | %s | %s | %s | %s | %s |", n, name,
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rate() }), f0),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.5).Seconds() }), ms),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.99).Seconds() }), ms),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rttPer() }), f1))
		}
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
