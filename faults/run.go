package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

// The faults a schedule draws from.
const (
	PauseHolder = "pause-holder" // SIGSTOP a holder for twice the TTL, then SIGCONT
	KillHolder  = "kill-holder"  // SIGKILL a holder, and start the worker again
	// PauseServer stops redis-server (with Redlock, one of the masters;
	// with PostgreSQL, the postmaster and every process it started) with
	// SIGSTOP for 1.5 TTL, then lets it go on with SIGCONT.
	PauseServer   = "pause-server"
	RestartServer = "restart-server" // kill redis-server (with Redlock, one of the masters) and start it again, empty
	// KillServer kills redis-server (with Redlock, one of the masters)
	// and starts it again, empty, after Redlock's restart delay: once
	// every lease it may have granted has run out (the run's longest
	// lease and a TTL more). On PostgreSQL it kills the postmaster and
	// its processes, as a crash would, and starts it again on the same
	// data after a quarter of a TTL: it recovers its tables from its log,
	// and the leases it granted run on.
	KillServer = "kill-server"
	// CutMajority cuts a holder off from a majority of Redlock's masters
	// for twice the TTL; it still reaches the others.
	CutMajority = "cut-majority"
	// ClusterFailover makes the replica of the Cluster master that serves
	// the lock key take over (CLUSTER FAILOVER), until the cluster is
	// whole again.
	ClusterFailover = "cluster-failover"
	// MigrateSlot moves the lock key's slot, with its keys, to another
	// Cluster master, as a resharding does.
	MigrateSlot = "migrate-slot"
	// KillMaster kills the master of a Sentinel group (SIGKILL); the
	// Sentinels promote its replica, and it rejoins, empty, as a replica.
	KillMaster = "kill-master"
	Failover   = "failover"    // a failover the Sentinels are asked for (SENTINEL FAILOVER), until every server follows the new master
	StopMember = "stop-member" // stop an etcd member (the leader every other time) for twice the TTL
	// IsolateLeader cuts the etcd leader off from the other members for
	// twice the TTL; the workers' clients still reach it.
	IsolateLeader = "isolate-leader"
	// PartitionMembers cuts the link between two etcd members (the leader
	// and a follower every other time) for twice the TTL; each still
	// reaches the third.
	PartitionMembers = "partition-members"
	CutHolder        = "cut-holder"  // cut a holder off from the servers for twice the TTL (its proxy drops everything)
	SlowHolder       = "slow-holder" // delay everything between a holder and the servers by half the TTL, for twice the TTL
	// LoseReply lets the commands of a worker (the holder, or one that
	// waits) through to Redis or PostgreSQL and loses their replies,
	// cutting the connection after each, for twice the TTL: operations
	// that took effect with an error, which go-redis sends again (and
	// postgreslock a release).
	LoseReply = "lose-reply"
	// RepeatCommand delivers each command of a worker (the holder, or one
	// that waits) to Redis twice, for twice the TTL, as a client that
	// sends a command again after a read timeout does.
	RepeatCommand = "repeat-command"
)

// Config is one run.
type Config struct {
	// Backend is "redis" (one redis-server), "sentinel" (a master, a
	// replica and three Sentinels; the workers count a write once the
	// replica has it, redislock.WithReplicaAck), "cluster" (a Redis
	// Cluster of two masters with a replica each), "redlock" (Members
	// independent masters), "etcd", "postgres" (one PostgreSQL server,
	// package postgreslock), or "none" (a lock that excludes nothing).
	Backend  string
	Members  int           // etcd members (default 1), Redlock's masters (default 3)
	Workers  int           // worker processes (default 4)
	Duration time.Duration // how long the workers contend
	TTL      time.Duration // the lease (default 1s)
	Wait     time.Duration // each Lock call's WithWait (default 2 TTL)
	Hold     time.Duration // the longest pause between a hold's writes (default 30ms)
	Seed     uint64
	Faults   []string // the kinds the schedule draws from; none: no faults
	Dir      string   // for the servers' data and the histories
	// Worker is the command line that starts a worker process: a program
	// whose first act is WorkerMain (the test binary, or faultcheck).
	Worker []string
	// CLI, when set, is the path of a dlock binary: the workers then hold
	// the lock through `dlock run`, whose CMD is the worker program doing
	// its writes (Redis and etcd).
	CLI string
	// Primitive is what the workers take (see Primitives; default a lock).
	// In an election run, each term writes with its epoch, and resigns.
	Primitive string
	// Limit is a semaphore's permits (default 3).
	Limit int
	// NoAck, on Sentinel, counts a write once the master has it, without
	// waiting for the replica's acknowledgement: a failover may then
	// promote a replica that never had it.
	NoAck bool
}

func (c *Config) defaults() {
	if c.Members == 0 {
		c.Members = 1
		if c.Backend == "redlock" {
			c.Members = 3
		}
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.Wait == 0 {
		c.Wait = 2 * c.TTL
	}
	if c.Hold == 0 {
		c.Hold = 30 * time.Millisecond
	}
	if c.Primitive == "" {
		c.Primitive = PrimLock
	}
	if c.Limit == 0 {
		c.Limit = 3
	}
}

// applies lists the faults each backend's schedules can throw.
var applies = map[string][]string{
	"redis":   {PauseHolder, KillHolder, PauseServer, RestartServer, KillServer, CutHolder, SlowHolder, LoseReply, RepeatCommand},
	"etcd":    {PauseHolder, KillHolder, StopMember, IsolateLeader, PartitionMembers, CutHolder, SlowHolder},
	"none":    {PauseHolder, KillHolder},
	"redlock": {PauseHolder, KillHolder, PauseServer, RestartServer, KillServer, CutHolder, CutMajority, SlowHolder, LoseReply, RepeatCommand},
	// The workers reach the Sentinels through their proxies, and the
	// master the Sentinels name directly.
	"sentinel": {PauseHolder, KillHolder, Failover, KillMaster},
	// The workers reach the Cluster's nodes directly: a proxy would hide
	// the addresses its redirections name.
	"cluster": {PauseHolder, KillHolder, ClusterFailover, MigrateSlot},
	// PostgreSQL keeps its data when it is killed: kill-server restarts
	// it on the same data directory. Two faults are left out.
	// Repeat-command: the proxy could replay a statement only on a
	// session of its own (a startup, its own connection's state), and no
	// PostgreSQL client sends a statement twice by itself: pgx never
	// re-sends one, and postgreslock's own second tries (a release whose
	// reply was lost) come on a new connection after an error, which
	// lose-reply throws. Restart-server: a server that comes back empty
	// is a new cluster, without the driver's tables, not a crash.
	"postgres": {PauseHolder, KillHolder, PauseServer, KillServer, CutHolder, SlowHolder, LoseReply},
}

func (c *Config) check() error {
	kinds, ok := applies[c.Backend]
	switch {
	case !ok:
		return fmt.Errorf("faults: unknown backend %q; want redis, sentinel, cluster, redlock, etcd, postgres or none", c.Backend)
	case c.Duration <= 0 || len(c.Worker) == 0 || c.Dir == "":
		return fmt.Errorf("faults: a run needs a duration, a worker command and a directory")
	case !slices.Contains(Primitives, c.Primitive):
		return fmt.Errorf("faults: unknown primitive %q; want %s", c.Primitive, strings.Join(Primitives, ", "))
	case !implements(c.Backend, c.Primitive):
		return fmt.Errorf("faults: the %s driver does not implement the %s", c.Backend, c.Primitive)
	case c.Limit < 1 || c.Limit > dlock.MaxLimit:
		return fmt.Errorf("faults: a semaphore's limit must be from 1 to %d, got %d", dlock.MaxLimit, c.Limit)
	case c.CLI != "" && (c.Backend != "redis" && c.Backend != "etcd" || c.Primitive != PrimLock):
		return fmt.Errorf("faults: dlock run takes a lock, on one redis-server or on etcd")
	case c.NoAck && c.Backend != "sentinel":
		return fmt.Errorf("faults: only Sentinel waits for a replica's acknowledgement")
	case c.Primitive == PrimElection && c.Backend == "none":
		return fmt.Errorf("faults: an election runs on a lock store")
	}
	for _, f := range c.Faults {
		if !slices.Contains(kinds, f) {
			return fmt.Errorf("faults: %q does not apply to %s; choose from %s", f, c.Backend, strings.Join(kinds, ", "))
		}
		if (f == IsolateLeader || f == PartitionMembers) && c.Members < 3 {
			return fmt.Errorf("faults: %s needs three etcd members or more, not %d", f, c.Members)
		}
	}
	return nil
}

// length is how long a fault of kind lasts, from its start to its undoing,
// plus a margin for what it waits on (a worker started again, a server
// restarted, a member that rejoins).
func (c *Config) length(kind string) time.Duration {
	switch kind {
	case StopMember:
		return 2*c.TTL + 4*time.Second // a member's stop and restart take seconds
	case Failover, KillMaster:
		return 10 * time.Second // until the old master follows the new one (see redistest.SentinelGroup.Settle)
	case ClusterFailover, MigrateSlot:
		return 3 * time.Second // until every node sees the cluster whole
	case IsolateLeader, PartitionMembers:
		return 2*c.TTL + 2*time.Second // and a second or two for an election
	case PauseHolder, CutHolder, CutMajority, SlowHolder, LoseReply, RepeatCommand:
		return 2*c.TTL + time.Second
	case KillServer:
		if c.Backend == "postgres" {
			return c.restartDelay() + 3*time.Second // and its recovery
		}
		return c.restartDelay() + time.Second
	case PauseServer:
		return c.TTL*3/2 + time.Second
	}
	return time.Second
}

// restartDelay is how long a server killed by KillServer stays down: the
// run's longest lease (a RunOnce run's hold) and a TTL more; PostgreSQL,
// which keeps its data, a quarter of a TTL, so that holds may outlive the
// crash.
func (c *Config) restartDelay() time.Duration {
	if c.Backend == "postgres" {
		return c.TTL / 4
	}
	lease := c.TTL
	if c.Primitive == PrimRunOnce {
		lease = runHold(c.TTL)
	}
	return lease + c.TTL
}

// cover is the shortest Duration in which the schedule throws each kind of
// c.Faults once, whatever the seed: each fault after a gap of up to three
// TTLs, and three TTLs left after the last gap.
func (c Config) cover() time.Duration {
	c.defaults()
	d := 3 * c.TTL
	for _, k := range c.Faults {
		d += 3*c.TTL + c.length(k)
	}
	return d
}

// fault is one fault of a schedule, as it ran.
type fault struct {
	Kind   string
	At     int64 // CLOCK_MONOTONIC when it began
	End    int64 // when it was undone
	Target string
}

// Run starts the servers, the store and the workers, throws the
// schedule's faults at them for cfg.Duration, and checks the history.
// When ctx ends first, it undoes the fault under way, kills the workers,
// stops the servers and returns ctx's error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	st, err := startStore(cfg.Limit)
	if err != nil {
		return nil, err
	}
	defer st.close()
	env, err := startServers(cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()

	stalls, err := openLogFile(filepath.Join(cfg.Dir, "stall-harness.jsonl"), -1)
	if err != nil {
		return nil, err
	}
	defer stalls.f.Close()
	stopWatch := stalls.watchStalls()
	defer stopWatch()

	ws := &workers{cfg: cfg, addrs: env.addrs, store: st.url, procs: map[int]*exec.Cmd{}, proxies: map[int][]*proxy{}}
	defer ws.closeProxies()
	for w := range cfg.Workers {
		if err := ws.start(w); err != nil {
			ws.stopAll()
			return nil, err
		}
	}
	// The run's time begins when every worker has started: on a loaded
	// machine, starting them can take seconds.
	if err := ws.ready(ctx, 60*time.Second); err != nil {
		ws.stopAll()
		return nil, err
	}
	until := now() + int64(cfg.Duration)
	ws.begin()
	sched := runSchedule(ctx, cfg, env, ws, st, until)
	// A run proves something only if the workers got to hold: a machine
	// too loaded to let them is given twice the duration and a minute
	// more.
	st.awaitSections(ctx, cfg.Workers, until+int64(2*cfg.Duration+time.Minute))
	ws.finish()
	if ctx.Err() != nil {
		ws.stopAll()
		return nil, ctx.Err()
	}
	ws.waitAll(cfg.Wait+cfg.TTL+10*time.Second, stalls.stalled.Load)
	stopWatch()
	hist, err := readHistory(cfg.Dir)
	if err != nil {
		return nil, err
	}
	return check(cfg, history{events: hist, writes: st.history(), sched: sched, kills: ws.kills, pauses: ws.pauses, hung: ws.hung}), nil
}

// node is a server that PauseServer and KillServer stop: a redis-server
// or PostgreSQL. Restart after Kill starts it again on the same port:
// redis-server empty, PostgreSQL on its data.
type node interface {
	Pause() error
	Resume() error
	Kill()
	Restart() error
	Close()
}

// servers are the lock store's processes (or members).
type servers struct {
	addrs    []string
	nodes    []node // redis-server, Redlock's masters, or PostgreSQL
	sentinel *redistest.SentinelGroup
	cluster  *clusterEnv
	etcd     *etcdCluster
}

func startServers(cfg Config) (*servers, error) {
	switch cfg.Backend {
	case "redis":
		dir := filepath.Join(cfg.Dir, "redis")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		s, err := redistest.New(dir, redistest.Config{})
		if err != nil {
			return nil, err
		}
		return &servers{addrs: []string{s.Addr()}, nodes: []node{s}}, nil
	case "redlock":
		env := &servers{}
		for i := range cfg.Members {
			dir := filepath.Join(cfg.Dir, fmt.Sprintf("redis-%d", i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				env.close()
				return nil, err
			}
			s, err := redistest.New(dir, redistest.Config{})
			if err != nil {
				env.close()
				return nil, err
			}
			env.addrs, env.nodes = append(env.addrs, s.Addr()), append(env.nodes, s)
		}
		return env, nil
	case "sentinel":
		g, err := redistest.NewSentinel(filepath.Join(cfg.Dir, "sentinel"), 1, 3)
		if err != nil {
			return nil, err
		}
		return &servers{addrs: g.SentinelAddrs(), sentinel: g}, nil
	case "cluster":
		c, err := startCluster(filepath.Join(cfg.Dir, "cluster"), workerPrefix, workerKey)
		if err != nil {
			return nil, err
		}
		return &servers{addrs: c.addrs(), cluster: c}, nil
	case "etcd":
		c, err := startEtcd(cfg, filepath.Join(cfg.Dir, "etcd"))
		if err != nil {
			return nil, err
		}
		return &servers{addrs: c.Endpoints(), etcd: c}, nil
	case "postgres":
		s, err := startPostgres()
		if err != nil {
			return nil, err
		}
		return &servers{addrs: []string{s.Addr()}, nodes: []node{s}}, nil
	case "none":
		return &servers{}, nil
	}
	return nil, fmt.Errorf("faults: unknown backend %q", cfg.Backend)
}

// nodeName names node i in a schedule.
func (s *servers) nodeName(i int) string {
	if n, ok := s.nodes[i].(*pgNode); ok {
		return n.name()
	}
	if len(s.nodes) == 1 {
		return "redis-server"
	}
	return fmt.Sprintf("master %d", i)
}

func (s *servers) close() {
	for _, n := range s.nodes {
		n.Close()
	}
	if s.sentinel != nil {
		s.sentinel.Close()
	}
	if s.cluster != nil {
		s.cluster.close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
}
