package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The Cluster part (-cluster): dlock beside bsm/redislock and redsync,
// each on a go-redis Cluster client, on a Cluster of three masters, and
// dlock's hot key on each shard beside the single-server figure.

// clusterMasters is the number of masters of the Cluster part.
const clusterMasters = 3

// clusterTarget is the Cluster c: parties get Cluster client options, and
// the server counters are the masters' added up. hotPrefix puts the hot
// key on a shard.
func clusterTarget(c *redistest.Cluster, admins []*redis.Client, hotPrefix string) *target {
	return &target{
		endpoint: func(pool int) endpoint {
			o := c.Options()
			o.ReadTimeout, o.WriteTimeout, o.DialTimeout = 0, 0, 0 // go-redis's defaults, as for one server
			if pool > 0 {
				o.PoolSize = pool
			} else {
				o.PoolSize = clientOptions("").PoolSize
			}
			return endpoint{cluster: o}
		},
		stats:     func(ctx context.Context) (serverStats, error) { return sumStats(ctx, admins) },
		hotPrefix: hotPrefix,
	}
}

// shardTag returns a hash tag whose slot master i serves, read from the
// Cluster itself (CLUSTER KEYSLOT).
func shardTag(ctx context.Context, c *redistest.Cluster, admin *redis.Client, i int) (string, error) {
	lo, hi := c.Slots(i)
	for j := 0; j < 10000; j++ {
		tag := fmt.Sprintf("s%d", j)
		s, err := admin.ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			return "", err
		}
		if int(s) >= lo && int(s) <= hi {
			return tag, nil
		}
	}
	return "", fmt.Errorf("no tag found for shard %d", i)
}

// runCluster measures the Cluster part and writes its report to out.
func runCluster(ctx context.Context, cfg config, out string) error {
	dir, err := os.MkdirTemp("", "dlock-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := redistest.NewCluster(dir, clusterMasters, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	var admins []*redis.Client
	for _, m := range c.Masters {
		a := redis.NewClient(clientOptions(m.Addr()))
		defer a.Close()
		admins = append(admins, a)
	}
	single, err := redistest.New(filepath.Join(dir, "single"), redistest.Config{})
	if err != nil {
		return err
	}
	defer single.Close()
	singleAdmin := redis.NewClient(clientOptions(single.Addr()))
	defer singleAdmin.Close()
	version := redisVersion(ctx, admins[0])
	start := time.Now()
	cfg.logf("Cluster of %d masters, redis-server %s", clusterMasters, version)

	// Part 1: uncontended, every goroutine on a key of its own, spread
	// over the shards by their names.
	whole := clusterTarget(c, admins, "")
	systems := []system{floor{}, dlockSys{}, bsmSys{}, redsyncSys{}}
	var uncont []cell
	for r := range cfg.repeats {
		for _, g := range cfg.goroutines {
			cells, err := uncontendedRepeat(ctx, whole, rotate(systems, r), g, cfg.duration, cfg.ttl, cfg.slices, false)
			if err != nil {
				return fmt.Errorf("cluster uncontended: %w", err)
			}
			for _, c := range cells {
				cfg.logf("cluster uncontended  repeat %d  %3d goroutines  %-16s %8.0f cycles/s  %5.2f rtt/cycle", r+1, g, c.sys, c.rate(), c.rttPer())
			}
			uncont = append(uncont, cells...)
		}
	}

	// Part 2: one hot key, on each shard for dlock, on the first for the
	// peers, and on one server for reference.
	type hotRow struct {
		label string
		t     *target
		sys   system
	}
	var rows []hotRow
	for i := range clusterMasters {
		tag, err := shardTag(ctx, c, admins[0], i)
		if err != nil {
			return err
		}
		t := clusterTarget(c, admins, "{"+tag+"}bench:hot:")
		rows = append(rows, hotRow{fmt.Sprintf("dlock, shard %d", i), t, dlockSys{}})
		if i == 0 {
			rows = append(rows, hotRow{"bsm/redislock 1ms, shard 0", t, bsmSys{interval: time.Millisecond}}, hotRow{"redsync, shard 0", t, redsyncSys{}})
		}
	}
	rows = append(rows, hotRow{"dlock, one server", redisTarget(single.Addr(), singleAdmin), dlockSys{}})
	hot := map[string][]hotCell{}
	for r := range cfg.hotRepeats {
		for _, n := range []int{8, 32} {
			for k := range rows {
				row := rows[(k+r)%len(rows)]
				cell, err := hotKey(ctx, row.t, row.sys, n, cfg.hotDuration, cfg.hold, cfg.ttl)
				if err != nil {
					return fmt.Errorf("cluster hot key, %s: %w", row.label, err)
				}
				cfg.logf("cluster hot key      repeat %d  %3d contenders  %-28s p50 %v  p99 %v  rtt/acq %.1f",
					r+1, n, row.label, cell.quantile(0.5).Round(time.Microsecond), cell.quantile(0.99).Round(time.Microsecond), cell.rttPer())
				key := fmt.Sprintf("%s/%d", row.label, n)
				hot[key] = append(hot[key], cell)
			}
		}
	}

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Redis Cluster: dlock beside bsm/redislock and redsync")
	p("")
	p("Measured %s in %v by `go run ./bench -cluster CLUSTER.md` (%d repeats of every uncontended cell, %d of every",
		start.Format("2006-01-02"), time.Since(start).Round(time.Second), cfg.repeats, cfg.hotRepeats)
	p("hot-key cell: median (min–max)), redis-server %s, a Cluster of %d masters on loopback, on %s.", version, clusterMasters, cpuModel())
	p("Every party has its own go-redis Cluster client; round trips are counted on each node's client (one per")
	p("command sent alone, one per pipeline). The floor is SET NX PX, then an EVALSHA compare-and-delete.")
	p("")
	p("## Uncontended lock+unlock, cycles per second")
	p("")
	p("| goroutines | floor | dlock | bsm/redislock | redsync | dlock ÷ better peer | round trips per cycle (dlock) |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range cfg.goroutines {
		st := func(name string) stat { return collect(cellsOf(uncont, ukey, name, g), cell.rate) }
		fl, dl, bs, rs := st("floor"), st("dlock"), st("bsm/redislock"), st("redsync")
		p("| %d | %s | %s | %s | %s | %.2f× | %.2f |", g, fmtStat(fl, f0), fmtStat(dl, f0), fmtStat(bs, f0), fmtStat(rs, f0),
			dl.med/max(bs.med, rs.med), collect(cellsOf(uncont, ukey, "dlock", g), cell.rttPer).med)
	}
	p("")
	p("## One hot key: hand-off latency")
	p("")
	p("Each contender is a party of its own; after a release it waits until another has taken the lock, so")
	p("every acquisition is a hand-off (see RESULTS.md, part 2).")
	p("")
	p("| contenders | where | hand-off p50 | hand-off p99 | round trips per acquisition |")
	p("|---:|---|---:|---:|---:|")
	for _, n := range []int{8, 32} {
		for _, row := range rows {
			cs := hot[fmt.Sprintf("%s/%d", row.label, n)]
			p("| %d | %s | %s | %s | %s |", n, row.label,
				fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.5).Seconds() }), ms),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.99).Seconds() }), ms),
				fmtStat(collect(cs, func(c hotCell) float64 { return c.rttPer() }), f1))
		}
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
