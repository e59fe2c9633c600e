// Command bench measures dlock side by side with github.com/bsm/redislock,
// github.com/go-redsync/redsync and github.com/redis/rueidis/rueidislock on
// one redis-server that it starts itself on a free loopback port, and
// dlock's etcd driver beside etcd's own concurrency.Mutex on embedded etcd
// clusters of one and three members. It writes the results as Markdown
// with one SVG chart per part.
//
// Usage:
//
//	go run . [-out RESULTS.md] [-quick] [-parts uncontended,hotkey,held,primitives,etcd,redlock,growth] [-duration 1s] [-repeats 5] ...
//
// It measures, with every comparison interleaved (each repeat runs every
// system in turn, in a rotated order) and repeated:
//
//  1. uncontended lock+unlock cycles per second at 1, 8 and 64 goroutines,
//     with the ratio to the floor (raw SET NX PX + EVALSHA compare-and-delete,
//     one command per round trip) and to the best of three floors (that one,
//     through go-redis's AutoPipeliner, and through rueidis), and the
//     allocations per cycle;
//  2. one hot key with 2, 8 and 32 contenders, each with its own client:
//     acquisitions and hand-offs per second, hand-off latency, fairness,
//     round trips and Redis commands per acquisition;
//  3. the cost of one acquisition: Redis commands, Redis CPU, client
//     allocations and CPU (from the cells of parts 1 and 2);
//  4. the cost of keeping 10,000 locks alive;
//  5. etcd: uncontended cycles and hot-key hand-offs of dlock's etcdlock and
//     etcd's concurrency.Mutex, with the Raft writes and round trips of each;
//  6. dlock's semaphore (limits 1 and 4), read-write lock (write and read)
//     and LockAll of two keys in one slot beside its mutex: uncontended
//     cycles and, for the exclusive ones, a hot key's hand-offs;
//  7. how cost grows: one Locker holding from 1,000 to a million locks
//     (Redis; etcd and PostgreSQL to 10,000), and one key with 2 to 256
//     contenders on every backend, with CPU, memory and requests per held
//     lock or per hand-off (on servers of its own);
//
// and the Redlock part (five independent servers of its own: dlock's
// redlock beside redsync, with its servers' CPU per hand-off beside one
// server's), which it writes to REDLOCK.md beside the results. The goals
// table at the end of the results checks every goal against this one run.
//
// Some parts also run alone: -cluster FILE (a Redis Cluster of three
// masters: dlock beside bsm/redislock and redsync, each on a Cluster
// client, and dlock's hot key on every shard), -redlock FILE, -growth FILE
// (part 7, as its section of FILE) and -postgres FILE.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := defaultConfig()
	out := fs.String("out", "RESULTS.md", "Markdown file to write; the SVG charts go beside it")
	clusterOut := fs.String("cluster", "", "measure only the Cluster part (3 masters, dlock beside bsm/redislock and redsync) and write it to this Markdown file")
	redlockOut := fs.String("redlock", "", "measure only the Redlock part (5 servers, dlock redlock beside redsync) and write it, with its goal, to this Markdown file (a full run writes REDLOCK.md beside -out)")
	pgOut := fs.String("postgres", "", "measure only the PostgreSQL part (dlock's postgreslock beside advisory locks, a lease row and cirello.io/pglock, on one server with fsync on) and write it as the PostgreSQL section of this Markdown file")
	growthOut := fs.String("growth", "", "measure only part 7 (how cost grows with held locks and with contenders, on every backend) and write it as its section of this Markdown file")
	fs.IntVar(&cfg.growth.redisMax, "growth-max", cfg.growth.redisMax, "part 7: the most Redis locks one Locker holds (powers of ten from 1000)")
	fs.IntVar(&cfg.growth.otherMax, "growth-other-max", cfg.growth.otherMax, "part 7: the most etcd and PostgreSQL locks one Locker holds")
	fs.DurationVar(&cfg.growth.window, "growth-window", cfg.growth.window, "part 7: how long each number of locks is held while measured")
	fs.DurationVar(&cfg.growth.ttl, "growth-ttl", cfg.growth.ttl, "part 7: the TTL of the held locks (renewed every ttl/3)")
	fs.DurationVar(&cfg.growth.hot, "growth-hot-duration", cfg.growth.hot, "part 7: length of one contended cell")
	growthBack := fs.String("growth-backends", strings.Join(growthBackends, ","), "part 7: comma-separated backends to measure: "+strings.Join(growthBackends, ", "))
	cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile of the run to this file")
	quick := fs.Bool("quick", false, "short cells and fewer locks, for a smoke test (a few minutes)")
	fs.DurationVar(&cfg.duration, "duration", cfg.duration, "length of one uncontended cell")
	fs.DurationVar(&cfg.hotDuration, "hot-duration", cfg.hotDuration, "length of one hot-key cell")
	fs.IntVar(&cfg.repeats, "repeats", cfg.repeats, "repeats of every uncontended cell")
	fs.IntVar(&cfg.slices, "slices", cfg.slices, "interleaved slices an uncontended cell is measured in")
	fs.IntVar(&cfg.hotRepeats, "hot-repeats", cfg.hotRepeats, "repeats of every hot-key cell")
	fs.IntVar(&cfg.primRepeats, "prims-repeats", cfg.primRepeats, "repeats of every cell of part 6 (the primitives)")
	fs.DurationVar(&cfg.hold, "hold", cfg.hold, "how long a hot-key holder keeps the lock")
	fs.IntVar(&cfg.holdLocks, "hold-locks", cfg.holdLocks, "locks held at once in part 4")
	fs.DurationVar(&cfg.holdWindow, "hold-window", cfg.holdWindow, "how long part 4 keeps them alive")
	fs.DurationVar(&cfg.holdTTL, "hold-ttl", cfg.holdTTL, "TTL of the locks of part 4 (renewed every ttl/3)")
	fs.DurationVar(&cfg.etcdDuration, "etcd-duration", cfg.etcdDuration, "length of one uncontended etcd cell")
	fs.DurationVar(&cfg.etcdHotDuration, "etcd-hot-duration", cfg.etcdHotDuration, "length of one hot-key etcd cell")
	fs.IntVar(&cfg.etcdRepeats, "etcd-repeats", cfg.etcdRepeats, "repeats of every etcd cell")
	parts := fs.String("parts", strings.Join(allParts, ","), "comma-separated parts to run: "+strings.Join(allParts, ", "))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if err := cfg.setParts(*parts); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if err := cfg.growth.setBackends(*growthBack); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		cfg.quick(set)
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	cfg.log = stderr
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *clusterOut != "" {
		if err := runCluster(ctx, cfg, *clusterOut); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	if *growthOut != "" {
		if err := runGrowth(ctx, cfg, *growthOut); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote the %q section of %s\n", growthHeading, *growthOut)
		return 0
	}
	if *pgOut != "" {
		if err := runPostgres(ctx, cfg, *pgOut); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote the PostgreSQL section of %s\n", *pgOut)
		return 0
	}
	if *redlockOut != "" {
		if err := runRedlock(ctx, cfg, *redlockOut); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	res, err := measure(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	if err := res.write(*out); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return 0
}
