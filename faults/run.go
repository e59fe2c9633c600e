package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

// The faults a schedule draws from.
const (
	PauseHolder   = "pause-holder"   // SIGSTOP a holder for twice the TTL, then SIGCONT
	KillHolder    = "kill-holder"    // SIGKILL a holder, and start the worker again
	PauseServer   = "pause-server"   // SIGSTOP redis-server (with Redlock, one of the masters) for 1.5 TTL, then SIGCONT
	RestartServer = "restart-server" // kill redis-server (with Redlock, one of the masters) and start it again, empty
	// KillServer kills redis-server (with Redlock, one of the masters)
	// and starts it again, empty, after Redlock's restart delay: once
	// every lease it may have granted has run out (the run's longest
	// lease and a TTL more).
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
	// waits) through to Redis and loses their replies, cutting the
	// connection after each, for twice the TTL: operations that took
	// effect with an error, which go-redis sends again.
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
	// independent masters), "etcd", or "none" (a lock that excludes
	// nothing).
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
}

func (c *Config) check() error {
	kinds, ok := applies[c.Backend]
	switch {
	case !ok:
		return fmt.Errorf("faults: unknown backend %q; want redis, sentinel, cluster, redlock, etcd or none", c.Backend)
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
		return c.restartDelay() + time.Second
	case PauseServer:
		return c.TTL*3/2 + time.Second
	}
	return time.Second
}

// restartDelay is how long a server killed by KillServer stays down: the
// run's longest lease (a RunOnce run's hold) and a TTL more.
func (c *Config) restartDelay() time.Duration {
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

// servers are the lock store's processes (or members).
type servers struct {
	addrs    []string
	nodes    []*redistest.Server // redis-server, or Redlock's masters
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
		return &servers{addrs: []string{s.Addr()}, nodes: []*redistest.Server{s}}, nil
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
	case "none":
		return &servers{}, nil
	}
	return nil, fmt.Errorf("faults: unknown backend %q", cfg.Backend)
}

// nodeName names node i in a schedule.
func (s *servers) nodeName(i int) string {
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

// workers are the worker processes, by worker number.
type workers struct {
	cfg   Config
	addrs []string
	store string
	phase int // 0: starting, 1: running, 2: finished

	mu      sync.Mutex
	procs   map[int]*exec.Cmd
	stdins  map[int]*os.File      // the write end of each worker's stdin: "go", then closed at the end
	readys  map[int]chan struct{} // closed when the worker says it is ready
	proxies map[int][]*proxy      // each worker's way to each server
	incarn  map[int]int
	kills   map[string]int64   // "<worker>.<incarnation>" -> when it was killed
	pauses  map[int][][2]int64 // worker -> its pauses
	hung    map[string]bool    // incarnations killed because they did not stop by themselves
}

func (ws *workers) start(w int) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.incarn == nil {
		ws.incarn, ws.kills, ws.pauses, ws.hung = map[int]int{}, map[string]int64{}, map[int][][2]int64{}, map[string]bool{}
		ws.stdins, ws.readys = map[int]*os.File{}, map[int]chan struct{}{}
	}
	if _, ok := ws.proxies[w]; !ok && ws.cfg.Backend != "cluster" {
		for _, a := range ws.addrs {
			p, err := startProxy(strings.TrimPrefix(a, "http://"))
			if err != nil {
				return err
			}
			ws.proxies[w] = append(ws.proxies[w], p)
		}
	}
	var addrs []string
	for i, p := range ws.proxies[w] {
		addrs = append(addrs, strings.TrimSuffix(ws.addrs[i], strings.TrimPrefix(ws.addrs[i], "http://"))+p.addr())
	}
	if ws.cfg.Backend == "cluster" {
		addrs = ws.addrs
	}
	cfg := workerConfig{
		Backend: ws.cfg.Backend, Addrs: addrs, Key: workerKey, TTL: ws.cfg.TTL, Wait: ws.cfg.Wait,
		Hold: ws.cfg.Hold, Store: ws.store, Worker: w, Incarnation: ws.incarn[w],
		Out: filepath.Join(ws.cfg.Dir, fmt.Sprintf("worker-%d.jsonl", w)), Seed: ws.cfg.Seed,
		CLI: ws.cfg.CLI, Self: ws.cfg.Worker, Primitive: ws.cfg.Primitive, Limit: ws.cfg.Limit, NoAck: ws.cfg.NoAck,
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd := exec.Command(ws.cfg.Worker[0], ws.cfg.Worker[1:]...)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	// A group of its own: a fault hits the worker and what it started
	// (dlock run and its CMD), as it would hit a machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The worker says "ready" on its stdout, and reads the run's end on
	// its stdin (awaitStart).
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("faults: start worker %d: %w", w, err)
	}
	ready := make(chan struct{})
	go func() {
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		if sc.Scan() {
			close(ready)
		}
		for sc.Scan() { // the rest, until the worker ends
		}
	}()
	ws.procs[w], ws.readys[w], ws.stdins[w] = cmd, ready, inW
	if ws.phase == 1 {
		fmt.Fprintln(inW, "go") // a worker that died meanwhile is seen by the run
	}
	return nil
}

// ready waits until every worker started so far said it is ready, or
// within timeout.
func (ws *workers) ready(ctx context.Context, timeout time.Duration) error {
	ws.mu.Lock()
	readys := maps.Clone(ws.readys)
	ws.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for w, r := range readys {
		select {
		case <-r:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("faults: worker %d not ready after %v", w, timeout)
		}
	}
	return nil
}

// begin lets the workers go.
func (ws *workers) begin() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.phase = 1
	for _, in := range ws.stdins {
		fmt.Fprintln(in, "go")
	}
}

// finish tells the workers that the run is over: they stop after the
// hold they are in.
func (ws *workers) finish() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.phase = 2
	for w, in := range ws.stdins {
		in.Close()
		delete(ws.stdins, w)
	}
}

// kill kills worker w and starts it again as its next incarnation; it
// returns the incarnation it killed, "<worker>.<incarnation>".
func (ws *workers) kill(w int) string {
	ws.mu.Lock()
	cmd := ws.procs[w]
	ws.mu.Unlock()
	signalGroup(cmd, syscall.SIGKILL)
	cmd.Wait()
	ws.mu.Lock()
	inc := fmt.Sprintf("%d.%d", w, ws.incarn[w])
	ws.kills[inc] = now()
	ws.incarn[w]++
	if in := ws.stdins[w]; in != nil {
		in.Close()
		delete(ws.stdins, w)
	}
	running := ws.phase == 1
	ws.mu.Unlock()
	if running {
		ws.start(w)
	}
	return inc
}

// pause stops worker w for d, then lets it go on.
func (ws *workers) pause(ctx context.Context, w int, d time.Duration) (int64, int64) {
	ws.mu.Lock()
	cmd := ws.procs[w]
	ws.mu.Unlock()
	t0 := now()
	signalGroup(cmd, syscall.SIGSTOP)
	sleep(ctx, d) // the fault itself: the worker stays stopped this long
	signalGroup(cmd, syscall.SIGCONT)
	t1 := now()
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, t1})
	ws.mu.Unlock()
	return t0, t1
}

// waitAll waits grace for the workers to stop by themselves, and longer
// by the time the machine did not run the harness meanwhile (stalled
// reads it; two minutes more at most), killing those still running then
// (hung).
func (ws *workers) waitAll(grace time.Duration, stalled func() int64) {
	ws.mu.Lock()
	procs := make(map[string]*exec.Cmd, len(ws.procs))
	for w, c := range ws.procs {
		procs[fmt.Sprintf("%d.%d", w, ws.incarn[w])] = c
	}
	ws.mu.Unlock()
	deadline, counted, extended := now()+int64(grace), stalled(), int64(0)
	for inc, c := range procs {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		for waiting := true; waiting; {
			t := time.NewTimer(time.Duration(max(deadline-now(), 0)))
			select {
			case <-done:
				waiting = false
			case <-t.C:
				if extra := stalled() - counted; extra > 0 && extended < int64(2*time.Minute) {
					counted, extended, deadline = counted+extra, extended+extra, deadline+extra
					break
				}
				signalGroup(c, syscall.SIGKILL)
				<-done
				ws.mu.Lock()
				ws.hung[inc] = true
				ws.mu.Unlock()
				waiting = false
			}
			t.Stop()
		}
	}
}

// network cuts worker w off from the servers (cut), or delays what flows
// between them by delay, for d; then heals. With only, it does so on the
// way to those servers (by index) alone.
func (ws *workers) network(ctx context.Context, w int, cut bool, delay, d time.Duration, only ...int) {
	ws.mu.Lock()
	ps := ws.proxies[w]
	ws.mu.Unlock()
	if len(only) > 0 {
		var some []*proxy
		for _, i := range only {
			some = append(some, ps[i])
		}
		ps = some
	}
	t0 := now()
	for _, p := range ps {
		p.setCut(cut)
		p.setDelay(delay)
	}
	sleep(ctx, d) // the fault: the network stays bad this long
	for _, p := range ps {
		p.setCut(false)
		p.setDelay(0)
	}
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, now()})
	ws.mu.Unlock()
}

// replies sets the reply fault f on worker w's way to the servers for d,
// and returns how many commands it hit.
func (ws *workers) replies(ctx context.Context, w int, f replyFault, d time.Duration) int {
	ws.mu.Lock()
	ps := ws.proxies[w]
	ws.mu.Unlock()
	t0 := now()
	for _, p := range ps {
		p.setReplies(f)
	}
	sleep(ctx, d) // the fault: the replies stay bad this long
	hits := 0
	for _, p := range ps {
		hits += p.setReplies(passReplies)
	}
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, now()})
	ws.mu.Unlock()
	return hits
}

func (ws *workers) closeProxies() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ps := range ws.proxies {
		for _, p := range ps {
			p.close()
		}
	}
}

func (ws *workers) stopAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, c := range ws.procs {
		signalGroup(c, syscall.SIGKILL)
		c.Wait()
	}
}

// runSchedule throws faults drawn from cfg.Seed until until: one every
// one to three TTLs, each undone before the next. The first round throws
// each kind of cfg.Faults once, in an order drawn from the seed, and goes
// on past until if it must (a loaded machine can make faults slow): a run
// meets every fault it names, within cfg.cover() on a machine that keeps
// up.
func runSchedule(ctx context.Context, cfg Config, env *servers, ws *workers, st *store, until int64) []fault {
	var sched []fault
	if len(cfg.Faults) == 0 {
		sleep(ctx, time.Duration(until-now()))
		return nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	first := rng.Perm(len(cfg.Faults))
	for n := 0; ctx.Err() == nil; n++ {
		gap := cfg.TTL + time.Duration(rng.Int64N(int64(2*cfg.TTL)))
		kind := cfg.Faults[rng.IntN(len(cfg.Faults))]
		if n < len(first) {
			kind = cfg.Faults[first[n]]
		}
		if now()+int64(gap+3*cfg.TTL) > until && n >= len(first) {
			sleep(ctx, time.Duration(max(until-now(), 0)))
			return sched
		}
		sleep(ctx, gap) // the quiet time between two faults
		f := fault{Kind: kind, At: now()}
		switch kind {
		case PauseHolder, KillHolder, CutHolder, CutMajority, SlowHolder:
			w := st.holder()
			if w < 0 {
				w = rng.IntN(cfg.Workers)
			}
			f.Target = fmt.Sprintf("worker %d", w)
			switch kind {
			case PauseHolder:
				f.At, f.End = ws.pause(ctx, w, 2*cfg.TTL)
			case KillHolder:
				st.forget(w)
				st.killed(ws.kill(w))
			case CutHolder:
				ws.network(ctx, w, true, 0, 2*cfg.TTL)
			case CutMajority:
				cut := rng.Perm(len(env.nodes))[:len(env.nodes)/2+1]
				slices.Sort(cut)
				f.Target += fmt.Sprintf(" from masters %v", cut)
				ws.network(ctx, w, true, 0, 2*cfg.TTL, cut...)
			case SlowHolder:
				ws.network(ctx, w, false, cfg.TTL/2, 2*cfg.TTL)
			}
			f.End = now()
		case LoseReply, RepeatCommand:
			w := st.holder()
			if w < 0 || rng.IntN(2) == 0 { // a worker that waits, or the holder
				w = rng.IntN(cfg.Workers)
			}
			rf := loseReplies
			if kind == RepeatCommand {
				rf = repeatCommands
			}
			hits := ws.replies(ctx, w, rf, 2*cfg.TTL)
			f.Target, f.End = fmt.Sprintf("worker %d (%d commands)", w, hits), now()
		case PauseServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Pause()
			sleep(ctx, cfg.TTL*3/2) // the fault: the server stays stopped
			env.nodes[i].Resume()
			f.End = now()
		case KillServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Kill()
			sleep(ctx, cfg.restartDelay()) // the fault: the server stays down
			if err := env.nodes[i].Restart(); err != nil {
				f.Target += fmt.Sprintf(" (not restarted: %v)", err)
			}
			f.End = now()
		case RestartServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Restart()
			f.End = now()
		case Failover:
			f.Target = "the Sentinels"
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			if m, err := env.sentinel.Failover(fctx); err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			} else if err := env.sentinel.Settle(fctx); err != nil {
				f.Target += fmt.Sprintf(" (to %s, not settled: %v)", m.Addr(), err)
			} else {
				f.Target += " (to " + m.Addr() + ")"
			}
			cancel()
			f.End = now()
		case IsolateLeader, PartitionMembers:
			l, err := env.etcd.Leader()
			if err != nil {
				l = rng.IntN(env.etcd.Size())
			}
			others := []int{}
			for i := range env.etcd.Size() {
				if i != l {
					others = append(others, i)
				}
			}
			rng.Shuffle(len(others), func(a, b int) { others[a], others[b] = others[b], others[a] })
			switch {
			case kind == IsolateLeader:
				f.Target = fmt.Sprintf("etcd member %d (the leader)", l)
				err = env.etcd.Isolate(l)
			case n%2 == 0 || len(others) < 2:
				f.Target = fmt.Sprintf("etcd members %d (the leader) and %d", l, others[0])
				err = env.etcd.Partition(l, others[0])
			default:
				f.Target = fmt.Sprintf("etcd members %d and %d", others[0], others[1])
				err = env.etcd.Partition(others[0], others[1])
			}
			if err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			}
			sleep(ctx, 2*cfg.TTL) // the fault: the members stay apart
			env.etcd.Heal()
			f.End = now()
		case ClusterFailover, MigrateSlot:
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			var err error
			if kind == ClusterFailover {
				f.Target, err = env.cluster.failover(fctx)
			} else {
				to := (env.cluster.owner + 1 + rng.IntN(len(env.cluster.c.Masters)-1)) % len(env.cluster.c.Masters)
				f.Target, err = env.cluster.migrate(fctx, to)
			}
			cancel()
			if err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			}
			f.End = now()
		case KillMaster:
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			killed, promoted, err := env.sentinel.KillMaster(fctx)
			switch {
			case err != nil:
				f.Target = fmt.Sprintf("the master (%v)", err)
			default:
				f.Target = fmt.Sprintf("the master %s (%s promoted)", killed.Addr(), promoted.Addr())
			}
			if killed != nil {
				if err := env.sentinel.Rejoin(fctx, killed); err != nil {
					f.Target += fmt.Sprintf(" (not rejoined: %v)", err)
				}
			}
			cancel()
			f.End = now()
		case StopMember:
			i := rng.IntN(env.etcd.Size())
			if n%2 == 0 {
				if l, err := env.etcd.Leader(); err == nil {
					i = l
				}
			}
			f.Target = fmt.Sprintf("etcd member %d", i)
			env.etcd.Stop(i)
			sleep(ctx, 2*cfg.TTL) // the fault: the member stays down
			env.etcd.Restart(i)
			f.End = now()
		}
		sched = append(sched, f)
	}
	return sched
}

// signalGroup sends sig to the process group that cmd leads.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
