package main

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// stat is the median and the spread of one figure over the repeats.
type stat struct{ med, lo, hi float64 }

func statOf(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{med: med, lo: s[0], hi: s[len(s)-1]}
}

// fmtStat prints "median (min–max)", or the median alone for one repeat.
func fmtStat(s stat, f func(float64) string) string {
	if s.lo == s.hi {
		return f(s.med)
	}
	return f(s.med) + " (" + f(s.lo) + "–" + f(s.hi) + ")"
}

func (s stat) bar() bar { return bar{med: s.med, lo: s.lo, hi: s.hi} }

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func ms(v float64) string { // v in seconds
	switch {
	case v >= 0.1:
		return fmt.Sprintf("%.0f ms", v*1e3)
	case v >= 0.01:
		return fmt.Sprintf("%.1f ms", v*1e3)
	default:
		return fmt.Sprintf("%.2f ms", v*1e3)
	}
}

// cellsOf returns the cells of one system and concurrency, in repeat order.
func cellsOf[C any](cs []C, key func(C) (string, int), sys string, n int) []C {
	var r []C
	for _, c := range cs {
		if s, k := key(c); s == sys && k == n {
			r = append(r, c)
		}
	}
	return r
}

func ukey(c cell) (string, int)    { return c.sys, c.n }
func hkey(c hotCell) (string, int) { return c.sys, c.n }

func collect[C any](cs []C, f func(C) float64) stat {
	xs := make([]float64, len(cs))
	for i, c := range cs {
		xs[i] = f(c)
	}
	return statOf(xs)
}

// floorCycle is the median time of one floor lock+unlock cycle on one
// goroutine: the unit of the hand-off goals.
func (r *results) floorCycle() float64 {
	s := collect(cellsOf(r.uncont, ukey, floor{}.name(), 1), func(c cell) float64 { return c.rate() })
	if s.med == 0 {
		return 0
	}
	return 1 / s.med
}

func (r *results) write(out string) error {
	dir := filepath.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type svgFile struct {
		file string
		c    chart
	}
	var charts []svgFile
	if len(r.uncont) > 0 {
		charts = append(charts, svgFile{"uncontended.svg", r.uncontendedChart()})
	}
	if len(r.hot) > 0 {
		charts = append(charts, svgFile{"hotkey.svg", r.hotChart()})
	}
	if len(r.uncont) > 0 || len(r.hot) > 0 {
		charts = append(charts, svgFile{"cost.svg", r.costChart()})
	}
	if len(r.holds) > 0 {
		charts = append(charts, svgFile{"held.svg", r.holdChart()})
	}
	if len(r.etcd) > 0 {
		charts = append(charts, svgFile{"etcd.svg", r.etcdChart()})
	}
	if r.growth != nil {
		for name, c := range r.growth.charts() {
			charts = append(charts, svgFile{name, c})
		}
	}
	for _, c := range charts {
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.c.svg()), 0o644); err != nil {
			return err
		}
	}
	if r.redlock != nil {
		if err := os.WriteFile(filepath.Join(dir, "REDLOCK.md"), []byte(r.redlock.report()), 0o644); err != nil {
			return err
		}
	}
	var b strings.Builder
	r.markdown(&b)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

func (r *results) markdown(b *strings.Builder) {
	cfg := r.cfg
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("# dlock beside its peers")
	p("")
	p("Written by `make bench` (`cd bench && go run . -out RESULTS.md`) on %s; the run took %s.", r.start.UTC().Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second))
	p("Every figure below comes from this one run (parts: %s), with every comparison interleaved: the Redis parts on one", strings.Join(cfg.parts, ", "))
	p("redis-server, the etcd part on one embedded etcd cluster of each size. A Redis Cluster and Redlock over five")
	p("servers have parts of their own, in [CLUSTER.md](CLUSTER.md) and [REDLOCK.md](REDLOCK.md) (`make bench` writes all three;")
	p("the Redlock part runs in this run, on servers of its own, and its goal is in the table at the end).")
	p("")
	p("## Machine and versions")
	p("")
	p("| what | value |")
	p("|---|---|")
	p("| CPU | %s, %d cores (GOMAXPROCS %d), %s/%s |", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	p("| load average | %s at the start, %s at the end (other work on the machine competes for its cores) |", r.load[0], r.load[1])
	p("| Go | %s |", runtime.Version())
	if r.redis != "" {
		p("| Redis | redis-server %s on loopback, no persistence, started by the program |", r.redis)
	}
	if len(r.etcd) > 0 {
		p("| etcd | embedded in this process (`etcdlock/etcdtest`): %s on loopback, fsync off, heartbeat 50 ms |", membersList(r.etcd))
	}
	for _, v := range versions() {
		p("| %s | %s |", v[0], v[1])
	}
	p("| settings | uncontended cells %v in %d slices × %d repeats; hot-key cells %v × %d repeats, hold %v; TTL %v; part 4: %d locks, TTL %v, window %v; etcd: uncontended cells %v in %d slices, hot-key cells %v, × %d repeats; part 6: × %d repeats; part 7: up to %d Redis and %d etcd and PostgreSQL locks, TTL %v, window %v, contended cells from %v |",
		cfg.duration, cfg.slices, cfg.repeats, cfg.hotDuration, cfg.hotRepeats, cfg.hold, cfg.ttl, cfg.holdLocks, cfg.holdTTL, cfg.holdWindow,
		cfg.etcdDuration, cfg.etcdSlices, cfg.etcdHotDuration, cfg.etcdRepeats, cfg.primRepeats,
		cfg.growth.redisMax, cfg.growth.otherMax, cfg.growth.ttl, cfg.growth.window, cfg.growth.hot)
	p("")
	p("## Method")
	p("")
	p("- **Interleaving.** Each repeat runs every system once per concurrency level, in an order rotated by one at every")
	p("  repeat. In part 1 every system's parties stay open through a repeat and its cell is measured in %d slices of", cfg.slices)
	p("  %v, taking turns with the other systems' slices (rotated again at every slice): load from other work on this", cfg.duration/time.Duration(cfg.slices))
	p("  shared machine then falls on every system alike, and a ratio compares cells measured over the same second.")
	p("  Tables give the median over the repeats and, in brackets, the min–max.")
	p("- **Floors.** `SET key token NX PX ttl` with a 128-bit random token, then an `EVALSHA` compare-and-delete: the least")
	p("  a correct single-instance lock can do, sent three ways. *floor* is raw go-redis, one command per round trip (the")
	p("  floor of every \"× floor\" column); *floor go-redis AutoPipeline* goes through go-redis's experimental `AutoPipeliner`")
	p("  (`Client.AutoPipeline()`, default options), which sends the commands of concurrent goroutines together; *floor")
	p("  rueidis* goes through a rueidis client, which pipelines concurrent commands by default. *× best floor* divides by")
	p("  the fastest of the three in the same repeat.")
	p("- **Clients.** Every party has its own client (go-redis: pool of 80 connections, 4 in the hot key). Round trips are")
	p("  counted by a go-redis hook on each client (one per command sent alone, one per pipeline); rueidis has no such")
	p("  hooks, so on its connections every write counts as one round trip and the commands are read from the RESP")
	p("  written (a pipelining client writes a batch at once). The plain floor and bsm/redislock and redsync")
	p("  send every command on its own; a dlock Locker sends at most 4 at once and the commands its other goroutines issue")
	p("  meanwhile leave together in one pipeline, so its goroutines share round trips. *Redis commands* are")
	p("  the commands the clients sent: counted by the same hook, plus the (un)subscribe commands of pub/sub connections")
	p("  (which bypass hooks) from `INFO commandstats`. *Redis calls* are all that `INFO commandstats` counts, which")
	p("  includes every command a Lua script runs (a scripted compare-and-delete is EVALSHA + GET + DEL: 3 calls, 1")
	p("  command). Redis CPU comes from `INFO cpu` deltas (the program's own INFO calls are left out everywhere).")
	p("  Client allocations are `runtime.MemStats.Mallocs` deltas and client CPU is `getrusage` deltas, so background")
	p("  work (watchdogs, renewal goroutines) is included.")
	p("- **Peers as documented.** bsm/redislock: `Obtain` (no retry by default; `LinearBackoff` when waiting), `Release`.")
	p("  redsync: a new `Mutex` per acquisition with its defaults (32 tries, 50–250 ms random delay; `LockContext` is called")
	p("  again when it gives up), `UnlockContext`. rueidislock: a `Locker` per party as its README shows it for one server")
	p("  (`KeyMajority` 1, `NoLoopTracking`), `KeyValidity` the TTL, `ExtendInterval` TTL/3 like the peers' renewals (its")
	p("  default is half the validity), `TryNextAfter` raised from 20 ms to the 5 s timeout of every other client (with one")
	p("  key there is no next key to try, and on this loaded machine an attempt can take longer than 20 ms, which fails it);")
	p("  `TryWithContext` or `WithContext` (whose waiters wake on the client-side-caching invalidation of the key), and the")
	p("  returned cancel function to release. Its value is not visible, so in part 4 its key must merely exist.")
	p("- **Hot key.** Every contender is a party of its own. It loops: Lock (waiting the library's way), hold %v, Unlock,", cfg.hold)
	p("  then waits until *another* contender has acquired (at most %v; those waits are counted as turn timeouts)", turnWait)
	p("  before it calls Lock again. A contender that just released thus never races straight back in ahead of the")
	p("  waiters, so a polling library cannot look fast by re-acquiring its own lock, and acquisitions are hand-offs.")
	p("  Hand-off latency is the time from the holder starting its Unlock to the next holder's Lock returning. An atomic")
	p("  holder counter checks that no two contenders ever held the lock at once (overlaps).")
	p("- **Held locks.** One party takes %d locks, then keeps them alive for %v: the peers renew each lock from a", cfg.holdLocks, cfg.holdWindow)
	p("  goroutine of its own with a ticker at TTL/3 calling `Refresh`/`Extend` (how their documentation shows it); dlock")
	p("  uses its built-in watchdog. The window starts after a GC that also returns freed memory to the OS, so that")
	p("  neither the garbage of taking the locks nor memory an earlier system left is billed to the window's CPU.")
	p("  Goroutines are the most seen during the window less those before; heap and stacks")
	p("  are in use after a GC at the end of the window less before. A lock is lost when the library said so or when")
	p("  its key no longer holds its value on the server at the end.")
	if len(r.etcd) > 0 {
		p("- **etcd.** The cluster runs in this process (`etcdlock/etcdtest`), so client CPU and allocations include the")
		p("  server's. Each party has its own etcd client; round trips are counted by gRPC interceptors (one per unary call,")
		p("  one per message sent on a stream: a watch created, or cancelled while others stay on its stream, a lease")
		p("  keep-alive) and Raft writes are the store's revisions (read before and after each cell by a client that is not")
		p("  counted). dlock: `etcdlock.New(client)` with its defaults (locks share the Locker's session lease). etcd:")
		p("  `concurrency.Mutex` with the lock's key as its prefix, a new `Mutex` per acquisition on the party's one")
		p("  `concurrency.Session` (TTL %v); `TryLock`, or `Lock`, which waits in line on the delete of the key before its", cfg.ttl)
		p("  own. In the uncontended cells each system's party is opened for its slice alone (and warmed up with one cycle")
		p("  per goroutine), so that no system's background work runs in another's slice: the server shares this process.")
		p("  A hot-key cell that has not finished %v after its end is given up and shown as unfinished.", cfg.etcdGrace)
	}
	p("")
	if len(r.uncont) > 0 {
		r.part1(p)
	}
	if len(r.hot) > 0 {
		r.part2(p)
	}
	if len(r.uncont) > 0 || len(r.hot) > 0 {
		r.part3(p)
	}
	if len(r.holds) > 0 {
		r.part4(p)
	}
	if len(r.etcd) > 0 {
		r.part5(p)
	}
	if len(r.prims) > 0 {
		r.part6(p)
	}
	if r.growth != nil {
		r.growth.markdown(p)
	}
	r.goals(p)
}

type printer func(format string, args ...any)

func (r *results) part1(p printer) {
	p("## 1. Uncontended lock+unlock")
	p("")
	p("One client per system shared by the goroutines, each goroutine on a key of its own; one acquisition attempt per cycle.")
	p("Ratios: this system's cycles/s over the plain floor's, and over the best floor's, in the same repeat.")
	p("")
	p("![uncontended](uncontended.svg)")
	p("")
	p("| system | goroutines | cycles/s | × floor | × best floor | allocs/cycle | round trips/cycle | Redis cmds/cycle |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range r.cfg.goroutines {
		fl := rates(cellsOf(r.uncont, ukey, floor{}.name(), g))
		best := r.bestFloor(g)
		for _, s := range r.uSystems {
			cs := cellsOf(r.uncont, ukey, s, g)
			p("| %s | %d | %s | %s | %s | %s | %s | %s |", s, g,
				fmtStat(collect(cs, cell.rate), f0), fmtStat(ratio(cs, fl), f2), fmtStat(ratio(cs, best), f2),
				f1(collect(cs, cell.allocsPer).med), f2(collect(cs, cell.rttPer).med), f2(collect(cs, cell.cmdsPer).med))
		}
	}
	p("")
}

// ratio is the spread of cs's rates over the reference rates of the same
// repeats.
func ratio(cs []cell, ref []float64) stat {
	var xs []float64
	for i := range min(len(cs), len(ref)) {
		xs = append(xs, cs[i].rate()/ref[i])
	}
	return statOf(xs)
}

func rates(cs []cell) []float64 {
	xs := make([]float64, len(cs))
	for i, c := range cs {
		xs[i] = c.rate()
	}
	return xs
}

// bestFloor is, in each repeat at g goroutines, the rate of the fastest
// floor.
func (r *results) bestFloor(g int) []float64 {
	var best []float64
	for _, f := range floorSystems() {
		for i, x := range rates(cellsOf(r.uncont, ukey, f.name(), g)) {
			if i == len(best) {
				best = append(best, x)
			}
			best[i] = math.Max(best[i], x)
		}
	}
	return best
}

func (r *results) uncontendedChart() chart {
	c := chart{title: "Uncontended lock+unlock, throughput relative to the floor (median, min–max)",
		unit: "cycles/s ÷ floor cycles/s in the same repeat", ref: 1, refLabel: "floor"}
	for _, s := range r.uSystems {
		if s != (floor{}).name() {
			c.series = append(c.series, s)
		}
	}
	for _, g := range r.cfg.goroutines {
		c.groups = append(c.groups, fmt.Sprintf("%d goroutine%s", g, plural(g)))
		fl := rates(cellsOf(r.uncont, ukey, floor{}.name(), g))
		var row []bar
		for _, s := range c.series {
			st := ratio(cellsOf(r.uncont, ukey, s, g), fl)
			b := st.bar()
			b.label = fmt.Sprintf("%.2f× (%.0f/s)", st.med, collect(cellsOf(r.uncont, ukey, s, g), cell.rate).med)
			row = append(row, b)
		}
		c.vals = append(c.vals, row)
	}
	return c
}

func (r *results) part2(p printer) {
	fc := r.floorCycle()
	p("## 2. Hot key")
	p("")
	p("Contenders on separate clients fight for one key; the holder keeps it %v. Hand-off latency in floor cycles uses", r.cfg.hold)
	p("the floor's median single-goroutine cycle time, %s.", ms(fc))
	p("")
	p("![hot key](hotkey.svg)")
	p("")
	p("| system | contenders | acquisitions/s | hand-offs/s | hand-off p50 | hand-off p99 | p50 / p99 in floor cycles | acquisitions per contender (min–max) | round trips/acq | Redis cmds/acq | overlaps | turn timeouts |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.cfg.contenders {
		for _, s := range r.hotSystems {
			cs := cellsOf(r.hot, hkey, s, n)
			p50 := collect(cs, func(c hotCell) float64 { return c.quantile(0.5).Seconds() })
			p99 := collect(cs, func(c hotCell) float64 { return c.quantile(0.99).Seconds() })
			per := make([]int64, n)
			var overlaps, timeouts int64
			for _, c := range cs {
				for i, v := range c.perParty {
					per[i] += v
				}
				overlaps += c.overlaps
				timeouts += c.timeouts
			}
			cycles := "–"
			if fc > 0 {
				cycles = fmt.Sprintf("%.1f / %.1f", p50.med/fc, p99.med/fc)
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %d–%d | %s | %s | %d | %d |", s, n,
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rate() }), f0),
				fmtStat(collect(cs, hotCell.handoffRate), f0),
				fmtStat(p50, ms), fmtStat(p99, ms), cycles, slices.Min(per), slices.Max(per),
				f2(collect(cs, func(c hotCell) float64 { return c.rttPer() }).med),
				f2(collect(cs, func(c hotCell) float64 { return c.cmdsPer() }).med),
				overlaps, timeouts)
		}
	}
	p("")
	p("Acquisitions per contender are summed over the repeats.")
	p("")
}

func (r *results) hotChart() chart {
	c := chart{title: "Hot key: hand-off latency (bar: median p50; line: p50 to p99)", unit: "milliseconds (log scale)", log: true,
		series: r.hotSystems}
	for _, n := range r.cfg.contenders {
		c.groups = append(c.groups, fmt.Sprintf("%d contenders", n))
		var row []bar
		for _, s := range c.series {
			cs := cellsOf(r.hot, hkey, s, n)
			p50 := collect(cs, func(c hotCell) float64 { return c.quantile(0.5).Seconds() * 1e3 }).med
			p99 := collect(cs, func(c hotCell) float64 { return c.quantile(0.99).Seconds() * 1e3 }).med
			rate := collect(cs, hotCell.handoffRate).med
			row = append(row, bar{med: p50, lo: p50, hi: p99, label: fmt.Sprintf("%s / %s ms · %.0f hand-offs/s", num(p50), num(p99), rate)})
		}
		c.vals = append(c.vals, row)
	}
	return c
}

// costRows are the scenarios of part 3.
func (r *results) costRows() []struct {
	label string
	cells []cell
	sys   string
} {
	var rows []struct {
		label string
		cells []cell
		sys   string
	}
	// the fewest goroutines and the most: where dlock's goroutines share
	// round trips, the cost per acquisition falls
	gs := r.cfg.goroutines
	for _, g := range slices.Compact([]int{gs[0], gs[len(gs)-1]}) {
		for _, s := range r.uSystems {
			rows = append(rows, struct {
				label string
				cells []cell
				sys   string
			}{fmt.Sprintf("uncontended, %d goroutine%s", g, plural(g)), cellsOf(r.uncont, ukey, s, g), s})
		}
	}
	n := r.cfg.contenders[len(r.cfg.contenders)-1]
	for _, s := range r.hotSystems {
		var cs []cell
		for _, h := range cellsOf(r.hot, hkey, s, n) {
			cs = append(cs, h.cell)
		}
		rows = append(rows, struct {
			label string
			cells []cell
			sys   string
		}{fmt.Sprintf("hot key, %d contenders", n), cs, s})
	}
	return rows
}

func (r *results) part3(p printer) {
	p("## 3. Cost per acquisition")
	p("")
	p("From the cells of parts 1 and 2; an acquisition includes its release. Redis CPU is `used_cpu_sys + used_cpu_user`.")
	p("")
	p("![cost](cost.svg)")
	p("")
	p("| scenario | system | Redis cmds/acq | Redis calls/acq | calls by command | Redis CPU µs/acq | client allocs/acq | client CPU µs/acq |")
	p("|---|---|---:|---:|---|---:|---:|---:|")
	for _, row := range r.costRows() {
		cs := row.cells
		p("| %s | %s | %s | %s | %s | %s | %s | %s |", row.label, row.sys,
			f2(collect(cs, cell.cmdsPer).med), f2(collect(cs, cell.callsPer).med), breakdown(cs),
			f1(collect(cs, cell.redisCPUPer).med), f1(collect(cs, cell.allocsPer).med), f1(collect(cs, cell.clientCPUPer).med))
	}
	p("")
}

// breakdown lists the commands per acquisition over all repeats.
func breakdown(cs []cell) string {
	calls := map[string]int64{}
	var ops int64
	for _, c := range cs {
		for k, v := range c.m.server.calls {
			calls[k] += v
		}
		ops += c.ops
	}
	if ops == 0 {
		return "–"
	}
	keys := slices.SortedFunc(maps.Keys(calls), func(a, b string) int { return int(calls[b] - calls[a]) })
	var parts []string
	for _, k := range keys {
		v := float64(calls[k]) / float64(ops)
		if v < 0.01 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(k), v))
	}
	return strings.Join(parts, ", ")
}

func (r *results) costChart() chart {
	c := chart{title: "Redis commands per acquisition (median)", unit: "commands per acquisition, release included (log scale)", log: true}
	idx := map[string]int{}
	for _, row := range r.costRows() {
		if _, ok := idx[row.label]; !ok {
			idx[row.label] = len(c.groups)
			c.groups = append(c.groups, row.label)
			c.vals = append(c.vals, nil)
		}
	}
	var names []string
	names = append(names, r.uSystems...)
	for _, s := range r.hotSystems {
		if !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	c.series = names
	for gi := range c.vals {
		c.vals[gi] = make([]bar, len(names))
	}
	for _, row := range r.costRows() {
		gi, si := idx[row.label], slices.Index(names, row.sys)
		st := collect(row.cells, cell.cmdsPer)
		c.vals[gi][si] = bar{med: st.med, label: fmt.Sprintf("%.2f cmds · %.0f µs Redis CPU", st.med, collect(row.cells, cell.redisCPUPer).med)}
	}
	return c
}

func (r *results) part4(p printer) {
	cfg := r.cfg
	target := float64(cfg.holdLocks) / (cfg.holdTTL / 3).Seconds()
	p("## 4. %d held locks kept alive", cfg.holdLocks)
	p("")
	p("TTL %v, so one renewal per lock every %v: %.0f renewals/s is the least a renewing client can send.", cfg.holdTTL, (cfg.holdTTL / 3).Round(time.Millisecond), target)
	p("")
	p("![held locks](held.svg)")
	p("")
	p("| system | locks | Redis cmds/s | ÷ renewals needed | Redis calls/s | client CPU (cores) | Redis CPU (cores) | goroutines | heap MiB | stacks MiB | lost | time to acquire |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, h := range r.holds {
		p("| %s | %d | %.0f | %.2f | %.0f | %.4f | %.4f | %d | %.1f | %.1f | %d | %v |", h.sys, h.locks, h.cmdsPerSec, h.cmdsPerSec/target, h.callsPerSec,
			h.clientCore, h.redisCore, h.goroutines, h.heapMiB, h.stackMiB, h.lost, h.acquire.Round(time.Millisecond))
	}
	p("")
}

func (r *results) holdChart() chart {
	c := chart{title: fmt.Sprintf("Keeping %d locks alive: client CPU", r.cfg.holdLocks), unit: "client CPU, % of one core",
		groups: []string{fmt.Sprintf("%d locks, TTL %v", r.cfg.holdLocks, r.cfg.holdTTL)}}
	var row []bar
	for _, h := range r.holds {
		c.series = append(c.series, h.sys)
		row = append(row, bar{med: math.Max(h.clientCore*100, 0.01),
			label: fmt.Sprintf("%.2f%% · %d goroutines · %.0f MiB", h.clientCore*100, h.goroutines, h.heapMiB+h.stackMiB)})
	}
	c.vals = [][]bar{row}
	return c
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// loadAvg is the 1, 5 and 15 minute load averages of the machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// versions lists the libraries measured, from the build information.
func versions() [][2]string {
	want := []string{"github.com/bsm/redislock", "github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9",
		"github.com/redis/rueidis", "go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/server/v3"}
	var out [][2]string
	dl := "this repository"
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		dl += " at " + strings.TrimSpace(string(rev))
	}
	out = append(out, [2]string{"dlock", dl})
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, w := range want {
		for _, d := range bi.Deps {
			if d.Path == w {
				v := d.Version
				if d.Replace != nil {
					v = d.Replace.Version
				}
				out = append(out, [2]string{w, v})
			}
		}
	}
	return out
}
