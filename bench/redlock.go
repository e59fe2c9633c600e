package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
// waiters woken by the releases, fences always. The zero value names the
// Redlock of all the part's servers; one of three (floorNodes) has a name
// of its own.
type redlockSys struct{ addrs []string }

// floorNodes is the fewest servers a Redlock is run on: a majority of them
// is two grants.
const floorNodes = 3

// redlock3Name names dlock's redlock on floorNodes servers.
const redlock3Name = "dlock redlock on 3"

func (s redlockSys) name() string {
	if len(s.addrs) == floorNodes {
		return redlock3Name
	}
	return "dlock redlock"
}

// nodesOf is the number of servers that system sys of the Redlock part
// runs on.
func nodesOf(sys string) int {
	switch sys {
	case singleName:
		return 1
	case redlock3Name:
		return floorNodes
	}
	return redlockNodes
}

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

// redlockContenders are the contenders of the Redlock part's hot key.
var redlockContenders = []int{8, 32}

// redlockRun is the Redlock part's cells.
type redlockRun struct {
	cfg     config
	start   time.Time
	elapsed time.Duration
	version string
	uncont  []cell
	hot     []hotCell
	hotSys  []string
}

// singleName labels the single-node reference in the Redlock part.
const singleName = "dlock (one server)"

// runRedlock measures the Redlock part alone and writes its report, with
// its goal, to out.
func runRedlock(ctx context.Context, cfg config, out string) error {
	run, err := measureRedlock(ctx, cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(run.report()), 0o644)
}

// report is the Redlock part's report with its goals, as REDLOCK.md has it.
func (run *redlockRun) report() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	run.markdown(p)
	writeGoals(p, run.goals(), "")
	return b.String()
}

// measureRedlock starts five servers and measures the Redlock part's
// cells on them.
func measureRedlock(ctx context.Context, cfg config) (*redlockRun, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-redlock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var (
		addrs  []string
		admins []*goredislib.Client
	)
	for i := range redlockNodes {
		srv, err := redistest.New(filepath.Join(dir, fmt.Sprint(i)), redistest.Config{})
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		addrs = append(addrs, srv.Addr())
		admin := goredislib.NewClient(clientOptions(srv.Addr()))
		defer admin.Close()
		admins = append(admins, admin)
	}
	run := &redlockRun{cfg: cfg, start: time.Now(), version: redisVersion(ctx, admins[0])}
	first := redisTarget(addrs[0], admins[0])
	// all is the five servers: a party's endpoint names the first (the
	// Redlock systems take every address from addrs), the counters are
	// the sum over the five.
	all := &target{endpoint: first.endpoint, stats: func(ctx context.Context) (serverStats, error) { return sumStats(ctx, admins) }}
	three := &target{endpoint: first.endpoint, stats: func(ctx context.Context) (serverStats, error) { return sumStats(ctx, admins[:floorNodes]) }}
	cfg.logf("redis-server %s on %s", run.version, strings.Join(addrs, ", "))

	multi := []system{redlockSys{addrs}, redsyncMultiSys{addrs}}
	for r := range cfg.repeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, all, rotate(multi, r), g, cfg.duration, cfg.ttl, cfg.slices, false)
			if err != nil {
				return nil, fmt.Errorf("redlock uncontended: %w", err)
			}
			for _, c := range cells {
				cfg.logf("redlock uncontended  repeat %d  %3d goroutines  %-16s %8.0f cycles/s  %5.1f requests/cycle", r+1, g, c.sys, c.rate(), c.rttPer())
			}
			run.uncont = append(run.uncont, cells...)
		}
	}
	// dlockSys: one server, the first; and a Redlock of the first three,
	// whose majority is the floor of what a Redlock costs.
	hotSys := append(multi, redlockSys{addrs[:floorNodes]}, dlockSys{})
	run.hotSys = append(names(multi), redlock3Name, singleName)
	for r := range cfg.hotRepeats {
		for _, n := range redlockContenders {
			for _, s := range rotate(hotSys, r) {
				t := all
				switch s.(type) {
				case dlockSys:
					t = first // its server alone: the others stay idle
				case redlockSys:
					if s.name() == redlock3Name {
						t = three
					}
				}
				c, err := hotKey(ctx, t, s, n, cfg.hotDuration, cfg.hold, cfg.ttl)
				if err != nil {
					return nil, fmt.Errorf("redlock hot key: %w", err)
				}
				if t == first {
					c.sys = singleName
				}
				cfg.logf("redlock hot key      repeat %d  %3d contenders  %-18s %6.0f acq/s  p50 %v  p99 %v  requests/acq %.1f  server CPU/hand-off %.1f µs",
					r+1, n, c.sys, c.rate(), c.quantile(0.5).Round(time.Microsecond), c.quantile(0.99).Round(time.Microsecond), c.rttPer(), c.serverCPUPerHandoff())
				run.hot = append(run.hot, c)
			}
		}
	}
	run.elapsed = time.Since(run.start)
	return run, nil
}

// markdown writes the Redlock part's report.
func (run *redlockRun) markdown(p printer) {
	cfg := run.cfg
	p("# Redlock: dlock's redlock beside redsync on %d redis-servers", redlockNodes)
	p("")
	p("Measured %s in %v by `make bench` (or `cd bench && go run . -redlock REDLOCK.md`; %d repeats of every cell: median (min–max)), redis-server %s,",
		run.start.Format("2006-01-02"), run.elapsed.Round(time.Second), cfg.repeats, run.version)
	p("%d independent servers on loopback, on %s. Each party has its own client per server; a request is", redlockNodes, cpuModel())
	p("one command to one server (the %d of one acquisition go out at once).", redlockNodes)
	p("")
	p("## Uncontended lock+unlock, cycles per second")
	p("")
	p("| goroutines | dlock redlock | redsync | ratio | requests/cycle (redlock, redsync) |")
	p("|---:|---:|---:|---:|---|")
	for _, g := range cfg.goroutines {
		a := cellsOf(run.uncont, ukey, "dlock redlock", g)
		r := cellsOf(run.uncont, ukey, "redsync", g)
		sa, sr := collect(a, cell.rate), collect(r, cell.rate)
		p("| %d | %s | %s | %.2f× | %.1f, %.1f |", g, fmtStat(sa, f0), fmtStat(sr, f0), sa.med/sr.med,
			collect(a, cell.rttPer).med, collect(r, cell.rttPer).med)
	}
	p("")
	p("## One hot key: hand-off latency, requests and server CPU per hand-off")
	p("")
	p("Each contender is a party of its own; after a release it waits until another has taken the lock, so")
	p("every acquisition is a hand-off (see RESULTS.md, part 2). %q is the single-node", singleName)
	p("driver on the first server, for reference. Server CPU is `used_cpu_sys + used_cpu_user` from `INFO cpu`, read")
	p("before and after each cell and summed over the servers the system uses (all %d for the Redlock systems, the first %d", redlockNodes, floorNodes)
	p("for %q, idle time included; the first alone for the single node), divided by the hand-offs; client CPU is this", redlock3Name)
	p("process's `getrusage`.")
	p("")
	p("| contenders | system | acquisitions/s | hand-off p50 | hand-off p99 | requests/acquisition | server CPU/hand-off | × one server | client CPU/hand-off |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range redlockContenders {
		one := collect(cellsOf(run.hot, hkey, singleName, n), hotCell.serverCPUPerHandoff).med
		for _, s := range run.hotSys {
			cs := cellsOf(run.hot, hkey, s, n)
			srv := collect(cs, hotCell.serverCPUPerHandoff)
			x := "–"
			if one > 0 {
				x = f2(srv.med/one) + "×"
			}
			p("| %d | %s | %s | %s | %s | %s | %s µs | %s | %s µs |", n, s,
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rate() }), f0),
				fmtStat(collect(cs, p50), ms), fmtStat(collect(cs, p99), ms),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rttPer() }), f1),
				fmtStat(srv, f1), x, fmtStat(collect(cs, hotCell.clientCPUPerHandoff), f1))
		}
	}
	p("")
	p("## Where the server time goes")
	p("")
	p("`INFO commandstats` over the hot-key cells (all repeats), per hand-off: the commands the servers ran (those inside")
	p("scripts included), how many per node (over the %d servers for the Redlock systems), and `usec_per_call`.", redlockNodes)
	p("")
	p("| contenders | system | command | calls/hand-off | per node | µs/call | µs/hand-off |")
	p("|---:|---|---|---:|---:|---:|---:|")
	for _, n := range redlockContenders {
		for _, s := range run.hotSys {
			for _, c := range commandProfile(cellsOf(run.hot, hkey, s, n)) {
				p("| %d | %s | %s | %s | %s | %s | %s |", n, s, c.name, f2(c.perHandoff), f2(c.perHandoff/float64(nodesOf(s))), f2(c.usecPerCall), f2(c.usecPerHandoff))
			}
		}
	}
	p("")
}

// goals is the Redlock goal: a Redlock on three servers, whose majority
// of two grants is the floor, costs at most three times the single
// server's CPU per hand-off (each server runs what one server runs).
func (run *redlockRun) goals() []goal {
	const limit = 3.0
	var parts, costs []string
	ok := len(run.hot) > 0
	for _, n := range redlockContenders {
		own := collect(cellsOf(run.hot, hkey, redlock3Name, n), hotCell.serverCPUPerHandoff).med
		one := collect(cellsOf(run.hot, hkey, singleName, n), hotCell.serverCPUPerHandoff).med
		if one <= 0 {
			ok = false
			parts = append(parts, fmt.Sprintf("no single-server figure at %d", n))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s× at %d contenders (%s against %s µs)", f2(own/one), n, f1(own), f1(one)))
		ok = ok && own/one <= limit
		costs = append(costs, fmt.Sprintf("at %d: redlock %s; one server %s", n,
			profileSummary(cellsOf(run.hot, hkey, redlock3Name, n), floorNodes), profileSummary(cellsOf(run.hot, hkey, singleName, n), 1)))
	}
	return []goal{{what: "Redlock on 3 servers: server CPU per hand-off ≤ 3× the single server's", measured: strings.Join(parts, ", "), met: ok,
		costs: strings.Join(costs, "; ")}}
}

// cmdCost is one command's share of a hand-off.
type cmdCost struct {
	name           string
	perHandoff     float64
	usecPerCall    float64
	usecPerHandoff float64
}

// commandProfile adds up the commandstats of cs and divides them by their
// hand-offs, the costliest command first.
func commandProfile(cs []hotCell) []cmdCost {
	calls, usec := map[string]int64{}, map[string]int64{}
	var handoffs int64
	for _, c := range cs {
		if c.m == nil {
			continue
		}
		handoffs += c.handoffs
		for k, v := range c.m.server.calls {
			calls[k] += v
		}
		for k, v := range c.m.server.usec {
			usec[k] += v
		}
	}
	if handoffs == 0 {
		return nil
	}
	var out []cmdCost
	for k, n := range calls {
		h := float64(handoffs)
		out = append(out, cmdCost{name: k, perHandoff: float64(n) / h, usecPerCall: float64(usec[k]) / float64(n), usecPerHandoff: float64(usec[k]) / h})
	}
	slices.SortFunc(out, func(a, b cmdCost) int { return cmp.Compare(b.usecPerHandoff, a.usecPerHandoff) })
	return out
}

// profileSummary is commandProfile of cs in one line: the server CPU per
// hand-off, the share of it spent in commands, and the four costliest
// commands.
func profileSummary(cs []hotCell, nodes int) string {
	var parts []string
	var inCmds float64
	for i, c := range commandProfile(cs) {
		inCmds += c.usecPerHandoff
		if i < 4 {
			parts = append(parts, fmt.Sprintf("%s %s/hand-off (%s per node) at %s µs", c.name, f1(c.perHandoff), f1(c.perHandoff/float64(nodes)), f1(c.usecPerCall)))
		}
	}
	return fmt.Sprintf("%s µs server CPU per hand-off, %s µs of it in commands: %s", f1(collect(cs, hotCell.serverCPUPerHandoff).med), f1(inCmds), strings.Join(parts, ", "))
}
