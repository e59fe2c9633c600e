package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redistest"
)

// TestMeasure runs every part on a real redis-server with tiny cells and
// checks that the counts make sense: no figure is timed or compared.
func TestMeasure(t *testing.T) {
	t.Parallel() // each starts servers of its own and runs short windows; none asserts a figure
	// Two minutes alone; make test's other packages beside it took more.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.duration = 50 * time.Millisecond
	// A hot-key cell of 300ms saw no acquisition of a peer under make
	// test's load.
	cfg.hotDuration = time.Second
	cfg.repeats, cfg.hotRepeats = 2, 1
	cfg.goroutines = []int{1, 8}
	cfg.contenders = []int{2, 8}
	cfg.holdLocks = 200
	// A renewal a second into the window; a 900ms lease left too little
	// room for renewals that make test's other packages delayed (60 of 200
	// locks lapsed in one run).
	cfg.holdWindow = 1500 * time.Millisecond
	cfg.holdTTL = 3 * time.Second
	cfg.etcdMembers = []int{1}
	cfg.etcdDuration = 150 * time.Millisecond
	cfg.etcdHotDuration = 300 * time.Millisecond
	cfg.etcdContenders = []int{2}
	cfg.etcdGrace = 5 * time.Second
	cfg.primRepeats = 1
	// The Redlock part and part 7 have tests of their own.
	if err := cfg.setParts("uncontended,hotkey,held,primitives,etcd"); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		cfg.log = os.Stderr
	}
	res, err := measure(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if got, want := len(res.uncont), cfg.repeats*len(cfg.goroutines)*len(res.uSystems); got != want {
		t.Errorf("uncontended cells: got %d, want %d", got, want)
	}
	for _, c := range res.uncont {
		// dlock's goroutines share round trips: a pipeline carries several
		// commands, so only the commands are 2 a cycle at least.
		if c.ops <= 0 || c.rtt <= 0 || c.rtt > c.cmds || c.cmds < 2*c.ops || c.m.server.total() < c.cmds {
			t.Errorf("uncontended %s/%d: %d cycles, %d round trips, %d commands sent, %d run: want cycles > 0, 2 commands a cycle at least, no more round trips than commands, and no fewer run than sent",
				c.sys, c.n, c.ops, c.rtt, c.cmds, c.m.server.total())
		}
		if c.m.allocs == 0 {
			t.Errorf("uncontended %s/%d: no allocations counted", c.sys, c.n)
		}
	}

	if got, want := len(res.hot), cfg.hotRepeats*len(cfg.contenders)*len(res.hotSystems); got != want {
		t.Errorf("hot-key cells: got %d, want %d", got, want)
	}
	for _, c := range res.hot {
		var sum int64
		for _, v := range c.perParty {
			sum += v
		}
		switch {
		case c.ops <= 0:
			t.Errorf("hot key %s/%d: no acquisition", c.sys, c.n)
		case c.overlaps != 0:
			t.Errorf("hot key %s/%d: two holders at once %d times", c.sys, c.n, c.overlaps)
		case sum != c.ops || len(c.perParty) != c.n:
			t.Errorf("hot key %s/%d: per-contender counts %v do not add up to %d", c.sys, c.n, c.perParty, c.ops)
		case c.handoffs >= c.ops || int64(len(c.latencies)) != c.handoffs:
			t.Errorf("hot key %s/%d: %d hand-offs, %d latencies for %d acquisitions", c.sys, c.n, c.handoffs, len(c.latencies), c.ops)
		case c.rtt < 2*c.ops:
			t.Errorf("hot key %s/%d: %d round trips for %d acquisitions", c.sys, c.n, c.rtt, c.ops)
		}
		for _, l := range c.latencies {
			if l < 0 {
				t.Errorf("hot key %s/%d: negative hand-off latency %v", c.sys, c.n, l)
				break
			}
		}
	}

	if got, want := len(res.holds), len(holdSystems()); got != want {
		t.Errorf("held-lock cells: got %d, want %d", got, want)
	}
	for _, h := range res.holds {
		if h.lost != 0 {
			t.Errorf("held locks %s: %d of %d lost", h.sys, h.lost, h.locks)
		}
		if h.cmdsPerSec <= 0 {
			t.Errorf("held locks %s: no renewal seen", h.sys)
		}
	}

	if got, want := len(res.prims), cfg.primRepeats*len(cfg.goroutines)*len(primSystems()); got != want {
		t.Errorf("primitives' uncontended cells: got %d, want %d", got, want)
	}
	for _, c := range res.prims {
		// one command to acquire and one to release at least, and for
		// LockAll's two keys in one slot no more (but for the handshakes
		// of connections opened meanwhile): not one per key
		all := c.sys == primNames[primAll2]
		if c.ops <= 0 || c.cmds < 2*c.ops || all && c.cmds >= 3*c.ops || c.m.server.total() < c.cmds {
			t.Errorf("primitives, uncontended %s/%d: %d cycles, %d commands sent, %d run: want cycles > 0, 2 commands a cycle (LockAll: not 4)",
				c.sys, c.n, c.ops, c.cmds, c.m.server.total())
		}
	}
	if got, want := len(res.primsHot), cfg.primRepeats*len(primHotSystems()); got != want {
		t.Errorf("primitives' hot-key cells: got %d, want %d", got, want)
	}
	for _, c := range res.primsHot {
		if c.ops <= 0 || c.overlaps != 0 || c.handoffs >= c.ops {
			t.Errorf("primitives, hot key %s: %d acquisitions, %d overlaps, %d hand-offs", c.sys, c.ops, c.overlaps, c.handoffs)
		}
	}

	if got, want := len(res.etcd), len(cfg.etcdMembers); got != want {
		t.Fatalf("etcd runs: got %d, want %d", got, want)
	}
	for _, run := range res.etcd {
		if got, want := len(run.uncont), cfg.etcdRepeats*len(cfg.goroutines)*len(res.eSystems); got != want {
			t.Errorf("etcd uncontended cells: got %d, want %d", got, want)
		}
		for _, c := range run.uncont {
			// A put and a delete a cycle, whichever the system; every
			// cycle makes two round trips at least.
			if c.ops <= 0 || c.m.server.rev != 2*c.ops || c.rtt < 2*c.ops {
				t.Errorf("etcd uncontended %s/%d: %d cycles, %d revisions, %d round trips: want cycles > 0, 2 revisions and 2 round trips a cycle at least",
					c.sys, c.n, c.ops, c.m.server.rev, c.rtt)
			}
		}
		if got, want := len(run.hot), cfg.etcdRepeats*len(cfg.etcdContenders)*len(res.eSystems); got != want {
			t.Errorf("etcd hot-key cells: got %d, want %d", got, want)
		}
		for _, c := range run.hot {
			if !c.unfinished && (c.overlaps != 0 || c.m.server.rev < c.ops) {
				t.Errorf("etcd hot key %s/%d: %d overlaps, %d revisions for %d acquisitions", c.sys, c.n, c.overlaps, c.m.server.rev, c.ops)
			}
		}
	}

	// The report and its charts.
	dir := t.TempDir()
	out := filepath.Join(dir, "RESULTS.md")
	if err := res.write(out); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 1. Uncontended", "## 2. Hot key", "## 3. Cost per acquisition", "## 4. 200 held locks",
		"## 5. etcd", "## Goals", "![uncontended](uncontended.svg)", "| floor | 1 |", "× best floor", "| floor rueidis | 8 |",
		"| floor go-redis AutoPipeline | 1 |", "| rueidislock | 2 |", "bsm/redislock 100ms", "redsync", "| 1 | etcd concurrency.Mutex | 8 |",
		"## 6. Semaphores", "| semaphore, limit 4 | 8 |", "| LockAll, 2 keys in one slot | 1 |", "| read-write lock, write | "} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	for _, f := range []string{"uncontended.svg", "hotkey.svg", "cost.svg", "held.svg", "etcd.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Error(err)
			continue
		}
		if err := wellFormed(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if !bytes.Contains(b, []byte("<rect")) {
			t.Errorf("%s has no bars", f)
		}
	}
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// TestUsage checks that bad flags exit 2 with a message, before anything
// is started.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-repeats", "0"}, {"-nosuchflag"}, {"extra"}, {"-hold-ttl", "1ms"}, {"-parts", "hotkey,nosuchpart"}, {"-parts", ""}} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("run %q: exit %d, want 2", args, code)
		}
		if stderr.Len() == 0 {
			t.Errorf("run %q: nothing on stderr", args)
		}
	}
}

func TestChartScales(t *testing.T) {
	for _, tc := range []struct {
		in, want float64
	}{{0.7, 1}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {240, 500}} {
		if got := niceCeil(tc.in); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	c := chart{title: "a<b", groups: []string{"g"}, series: []string{"x", "y"}, vals: [][]bar{{{med: 2, lo: 1, hi: 3}, {med: 0}}}, log: true}
	s := c.svg()
	if err := wellFormed([]byte(s)); err != nil {
		t.Fatalf("svg not well formed: %v\n%s", err, s)
	}
	if !strings.Contains(s, "a&lt;b") || strings.Count(s, `fill="#`) < 2 {
		t.Errorf("svg lacks the escaped title or a bar:\n%s", s)
	}
	if strings.Contains(s, ">y<") {
		t.Errorf("a series without a value was drawn:\n%s", s)
	}
}

// BenchmarkCycle is part 1 as a Go benchmark, one goroutine, for profiling:
// go test -run '^$' -bench Cycle -cpuprofile cpu.out.
func BenchmarkCycle(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, sys := range uncontendedSystems() {
		b.Run(strings.ReplaceAll(sys.name(), " ", "_"), func(b *testing.B) {
			var rtt counter
			p, err := sys.party(endpoint{redis: clientOptions(srv.Addr())}, &rtt)
			if err != nil {
				b.Fatal(err)
			}
			defer p.close()
			b.ReportAllocs()
			rtt.reset()
			for b.Loop() {
				l, err := p.lock(ctx, "bench:cycle", defaultConfig().ttl, false)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rtt.n.Load())/float64(b.N), "rtt/op")
		})
	}
}

// TestParts checks -parts: the parts run in their own order whatever the
// order given, and a run of one part writes that part alone.
func TestParts(t *testing.T) {
	cfg := defaultConfig()
	if err := cfg.setParts("etcd, uncontended"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.parts, ","); got != "uncontended,etcd" {
		t.Errorf("parts: got %s, want uncontended,etcd", got)
	}
	if err := cfg.setParts("held"); err != nil {
		t.Fatal(err)
	}
	cfg.holdLocks = 100
	cfg.holdWindow = 300 * time.Millisecond
	// redsync bounds each node's request by 5% of the TTL: 15ms at 300ms,
	// which a loaded machine missed three times in a row.
	cfg.holdTTL = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := measure(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.uncont) != 0 || len(res.hot) != 0 || len(res.etcd) != 0 || len(res.holds) != len(holdSystems()) {
		t.Fatalf("parts %v measured %d uncontended, %d hot-key, %d held-lock cells and %d etcd runs", cfg.parts, len(res.uncont), len(res.hot), len(res.holds), len(res.etcd))
	}
	dir := t.TempDir()
	if err := res.write(filepath.Join(dir, "RESULTS.md")); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("## 4. 100 held locks")) || bytes.Contains(md, []byte("## 1.")) || bytes.Contains(md, []byte("## 5.")) {
		t.Errorf("RESULTS.md of part 4 alone:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "uncontended.svg")); err == nil {
		t.Error("uncontended.svg written without part 1")
	}
}

// The Cluster part measures every system on a Cluster client and dlock's
// hot key on every shard, and writes both tables with a figure in every
// cell.
func TestCluster(t *testing.T) {
	t.Parallel() // each starts servers of its own and runs short windows; none asserts a figure
	// Two minutes alone; make test's other packages beside it took more.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.duration, cfg.hotDuration = 50*time.Millisecond, 200*time.Millisecond
	cfg.repeats, cfg.hotRepeats = 1, 1
	cfg.goroutines = []int{1, 8}
	if testing.Verbose() {
		cfg.log = os.Stderr
	}
	out := filepath.Join(t.TempDir(), "CLUSTER.md")
	if err := runCluster(ctx, cfg, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{"| 1 |", "| 8 |", "dlock, shard 0", "dlock, shard 1", "dlock, shard 2", "dlock, one server", "redsync, shard 0"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "NaN") || strings.Contains(report, "| – |") {
		t.Errorf("the report has cells without a figure:\n%s", report)
	}
}
