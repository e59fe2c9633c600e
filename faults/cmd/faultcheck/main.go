// Command faultcheck runs dlock's fault checker: worker processes contend
// for one lock while a seeded schedule throws faults at them, and the
// checker reads the history for violations of mutual exclusion.
//
//	faultcheck -backend redis -faults pause-holder,kill-holder,pause-server -seconds 600
//
// With -primitive the workers take something else than a lock: permits of
// a semaphore (at most -limit at once), read and write locks of one key,
// LockAll over two or three of four keys, an election's leadership, or
// runs of a scheduled job (election.RunOnce).
//
//	faultcheck -backend redis -primitive semaphore -limit 3 -workers 5 -faults pause-holder,kill-holder
//
// The faults: pause-holder, kill-holder (any backend); cut-holder,
// slow-holder (Redis, Redlock, etcd, PostgreSQL); pause-server and
// kill-server (Redis; Redlock: one of its masters; PostgreSQL: the
// postmaster and every process it started), where kill-server restarts
// Redis empty after Redlock's restart delay, and PostgreSQL on its data
// after a quarter of the TTL, as after a crash; lose-reply
// (a command that takes effect and whose reply is lost: Redis, Redlock,
// PostgreSQL); restart-server (at once, empty) and repeat-command (a
// command delivered twice) (Redis, Redlock); cut-majority (Redlock: a
// holder cut off from a majority of the masters); failover, kill-master
// (Sentinel); cluster-failover, migrate-slot (Cluster); stop-member,
// isolate-leader, partition-members (etcd, three members).
//
//	faultcheck -backend postgres -primitive rwlock -faults pause-server,kill-server,lose-reply
//
// It prints the report, and with -table one row of the README's safety
// table. It exits 1 when the run broke a property every safe run keeps
// (unsafe writes or grants, fence regressions, stuck calls, a history that
// is not linearizable), leaving the run's artifacts (the report, the whole
// history, porcupine's visualisation of it) in a directory it names, under
// -artifacts; and 2 on bad flags.
// A run is replayed by giving its seed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/faults"
)

func main() {
	if faults.WorkerMain() {
		return
	}
	var (
		cfg     faults.Config
		seconds = flag.Int("seconds", 60, "how long the workers contend")
		list    = flag.String("faults", "", "comma-separated faults: pause-holder, kill-holder, cut-holder, slow-holder, pause-server, restart-server, kill-server, lose-reply, repeat-command, cut-majority, failover, kill-master, cluster-failover, migrate-slot, stop-member, isolate-leader, partition-members")
		table   = flag.Bool("table", false, "print the report as a row of the safety table too")
		leave   = flag.String("artifacts", faults.ArtifactsDir(), "where a failing run leaves its artifacts (report, history, porcupine's visualisation)")
	)
	flag.StringVar(&cfg.Backend, "backend", "redis", "redis, sentinel (with a replica's acknowledgement), cluster, redlock, etcd, postgres (one PostgreSQL server, started with initdb), or none (a lock that excludes nothing)")
	flag.BoolVar(&cfg.NoAck, "no-ack", false, "sentinel: count a write once the master has it, without a replica's acknowledgement")
	flag.IntVar(&cfg.Members, "members", 0, "etcd members (default 1), or Redlock's masters (default 3)")
	flag.IntVar(&cfg.Workers, "workers", 4, "worker processes")
	flag.DurationVar(&cfg.TTL, "ttl", time.Second, "the lease")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "the schedule's seed (0: from the clock)")
	flag.StringVar(&cfg.CLI, "dlock", "", "path of a dlock binary: the workers hold the lock through `dlock run`")
	flag.StringVar(&cfg.Primitive, "primitive", faults.PrimLock, "what the workers take: "+strings.Join(faults.Primitives, ", "))
	flag.IntVar(&cfg.Limit, "limit", 3, "a semaphore's permits")
	flag.Parse()
	if *seconds <= 0 || cfg.Workers <= 0 || cfg.Members < 0 || cfg.Limit <= 0 || cfg.TTL < time.Second || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "faultcheck: want -seconds, -workers and -limit above 0, -members of 0 or more, -ttl of 1s or more, and no arguments")
		os.Exit(2)
	}
	if *list != "" {
		cfg.Faults = strings.Split(*list, ",")
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	cfg.Duration = time.Duration(*seconds) * time.Second
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
	cfg.Worker = []string{self}
	dir, err := os.MkdirTemp("", "faultcheck-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	// Ctrl-C or a TERM ends the run early, its processes cleaned up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := faults.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(2)
	}
	fmt.Print(r)
	if *table {
		fmt.Println(r.Row())
	}
	if !r.OK() {
		dir, err := r.WriteArtifacts(*leave)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faultcheck: artifacts:", err)
		} else {
			fmt.Fprintln(os.Stderr, "faultcheck: artifacts in", dir)
		}
		os.Exit(1)
	}
}
