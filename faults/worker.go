package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// workerKey is the key the workers lock, under workerPrefix.
const workerKey, workerPrefix = "faults", "faults"

// workerEnv is the environment variable that makes a process a worker: it
// holds the worker's config as JSON.
const workerEnv = "DLOCK_FAULTS_WORKER"

// workerConfig is what one worker process is told.
type workerConfig struct {
	Backend     string   // see Config.Backend
	Addrs       []string // the servers
	Key         string
	TTL         time.Duration
	Wait        time.Duration // each Lock call's WithWait
	Hold        time.Duration // the longest pause between a hold's writes
	Store       string        // the fenced store's URL
	Worker      int
	Incarnation int // counts the restarts of this worker
	Out         string
	Seed        uint64
	CLI         string   // a dlock binary: hold the lock through `dlock run`
	Self        []string // the worker program, as dlock run's CMD
	Section     string   // set for dlock run's CMD: the hold it is the critical section of
	Primitive   string   // what the workers take: see Primitives
	Limit       int      // a semaphore's permits
	NoAck       bool     // Sentinel: without a replica's acknowledgement
}

// event is one line of a worker's history.
type event struct {
	E      string            // start, acq, fail, write, refresh, down, done, rel, relok, stall
	Hold   string            // "<worker>.<incarnation>.<seq>"
	T      int64             // CLOCK_MONOTONIC; for refresh and down, when the call began; for stall, when it began
	End    int64             `json:",omitempty"` // refresh, down: when the call returned (0: the call is under way); stall: when it ended
	Fence  uint64            `json:",omitempty"` // acq: the highest of Keys; write: the fence written with
	Kind   string            `json:",omitempty"` // start, acq: how the hold shares its keys (exclusive, shared, permit)
	Keys   map[string]uint64 `json:",omitempty"` // start: the keys asked for; acq: each key held, with its fence
	Key    string            `json:",omitempty"` // write: the key written to
	OK     bool              `json:",omitempty"` // write: accepted
	Lost   bool              `json:",omitempty"` // done: the hold was lost
	Taken  bool              `json:",omitempty"` // done: lost because the server no longer had it (dlock.ErrOwnershipLost)
	Busy   bool              `json:",omitempty"` // fail: the lock was busy
	Err    string            `json:",omitempty"`
	Worker int
}

// WorkerMain runs a worker, or a run's etcd servers, when the process was
// started as one, and reports false otherwise. A test's TestMain and cmd/faultcheck call it
// first thing.
func WorkerMain() bool {
	if raw := os.Getenv(etcdEnv); raw != "" {
		if err := serveEtcd(raw); err != nil {
			fmt.Fprintln(os.Stderr, "faults etcd:", err)
			os.Exit(1)
		}
		return true
	}
	raw := os.Getenv(workerEnv)
	if raw == "" {
		return false
	}
	var cfg workerConfig
	err := json.Unmarshal([]byte(raw), &cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults worker:", err)
		os.Exit(2)
	}
	run := runWorker
	if cfg.Section != "" {
		run = runSection
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "faults worker:", err)
		os.Exit(1)
	}
	return true
}

// awaitStart tells the run that this worker is ready, on stdout, and
// waits for its "go" on stdin; the run ends when stdin does, which the
// function it returns reports (false).
func awaitStart() (running func() bool, err error) {
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		return nil, fmt.Errorf("wait for the run's start: %q, %v", line, err)
	}
	end := make(chan struct{})
	go func() {
		io.Copy(io.Discard, in) // until the run closes stdin
		close(end)
	}()
	return func() bool {
		select {
		case <-end:
			return false
		default:
			return true
		}
	}, nil
}

// log is a worker's history file, written a line at a time so that a
// worker killed mid-hold leaves everything before the kill.
type log struct {
	mu      sync.Mutex
	f       *os.File
	enc     *json.Encoder
	w       int
	stalled atomic.Int64 // the stalls watchStalls recorded, in all
}

func (l *log) add(e event) {
	e.Worker = l.w
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enc.Encode(e) // one write(2) per line: the file is unbuffered
}

// call makes a call of hold id (kind is "down" or "refresh"), with its
// event on record before it is made and again, with its end and error,
// when it returns: a worker killed in the call leaves it on record, its
// outcome unknown.
func (l *log) call(kind, id string, fn func() error) error {
	e := event{E: kind, Hold: id, T: now()}
	l.add(e)
	err := fn()
	e.End = now()
	if err != nil {
		e.Err = err.Error()
	}
	l.add(e)
	return err
}

// watchStalls records the stalls of this process (see watchStalls) until
// the function it returns is called.
func (l *log) watchStalls() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchStalls(ctx, func(from, to int64) {
			l.stalled.Add(to - from)
			l.add(event{E: "stall", T: from, End: to})
		})
	}()
	return func() { cancel(); <-done }
}

// openLog opens the worker's history file.
func openLog(cfg workerConfig) (*log, error) { return openLogFile(cfg.Out, cfg.Worker) }

// openLogFile opens the history file name of worker w (-1: a process that
// serves every worker).
func openLogFile(name string, w int) (*log, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &log{f: f, enc: json.NewEncoder(f), w: w}, nil
}

func runWorker(cfg workerConfig) error {
	hist, err := openLog(cfg)
	if err != nil {
		return err
	}
	defer hist.f.Close()
	stop := hist.watchStalls()
	defer stop()
	running, err := awaitStart()
	if err != nil {
		return err
	}
	if cfg.CLI != "" {
		return runCLI(cfg, hist, running)
	}
	locker, closeLocker, err := newLocker(cfg)
	if err != nil {
		return err
	}
	defer closeLocker()
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Worker)<<32|uint64(cfg.Incarnation)))
	for seq := 0; running(); seq++ {
		id := fmt.Sprintf("%d.%d.%d", cfg.Worker, cfg.Incarnation, seq)
		p := planFor(cfg, rng)
		hist.add(started(id, p))
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Wait+cfg.TTL+5*time.Second)
		tm, err := acquire(ctx, cfg, locker, p)
		if err != nil {
			cancel()
			busy := errors.Is(err, dlock.ErrNotAcquired)
			hist.add(event{E: "fail", Hold: id, T: now(), Busy: busy, Err: err.Error()})
			switch {
			case busy && cfg.Primitive == PrimRunOnce:
				time.Sleep(cfg.TTL / 10) // RunOnce tries once: the next tick
			case !busy:
				time.Sleep(20 * time.Millisecond) // the server is down: pace the retries
			}
			continue
		}
		ts := tm.targets()
		hist.add(acquired(id, ts))
		go func() {
			<-tm.done()
			hist.add(event{E: "done", Hold: id, T: now(), Lost: tm.lost(), Taken: tm.taken()})
		}()
		var down func() error
		if t, ok := tm.(*lockTerm); ok && t.downgrade {
			down = func() error { return dlock.Downgrade(ctx, t.lk) }
		}
		refresh := func() error { return tm.refresh(ctx, cfg.TTL) }
		section(cfg, hist, rng, id, ts, refresh, down)
		hist.add(event{E: "rel", Hold: id, T: now()})
		err = tm.end(ctx)
		cancel()
		e := event{E: "relok", Hold: id, T: now()}
		if err != nil {
			e.Err = err.Error()
		}
		hist.add(e)
	}
	return nil
}

// started is the start event of hold id, which asks for p.
func started(id string, p plan) event {
	e := event{E: "start", Hold: id, T: now(), Kind: p.kind, Keys: map[string]uint64{}}
	for _, k := range p.keys {
		e.Keys[k] = 0
	}
	return e
}

// acquired is the acq event of hold id, which holds ts.
func acquired(id string, ts []target) event {
	e := event{E: "acq", Hold: id, T: now(), Kind: ts[0].kind, Keys: map[string]uint64{}}
	for _, t := range ts {
		e.Keys[t.key] = t.fence
		e.Fence = max(e.Fence, t.fence)
	}
	return e
}

// section is the critical section of hold id: two writes to each key of
// ts with its fence, some work before each, and now and then a long hold
// that lives on its renewals. Before each write the hold renews its lease
// (refresh, when the worker has the hold's handle), which the checker
// reads as a proof that the lease lasts a TTL from the call. A write lock
// that downgrades (down) does so between its writes, and writes the
// second time as a reader.
func section(cfg workerConfig, hist *log, rng *rand.Rand, id string, ts []target, refresh, down func() error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	worker := strconv.Itoa(cfg.Worker)
	post(hc, cfg.Store+"/holding", url.Values{"worker": {worker}, "held": {"1"}})
	for i := range 2 {
		work := time.Duration(rng.Int64N(int64(cfg.Hold) + 1))
		if i == 1 && rng.IntN(5) == 0 {
			work = cfg.TTL * 3 / 2
		}
		time.Sleep(work) // the work between writes
		if i == 1 && down != nil && hist.call("down", id, down) == nil {
			for j := range ts {
				ts[j].kind = shared
			}
		}
		if refresh != nil {
			hist.call("refresh", id, refresh)
		}
		for _, t := range ts {
			fence := strconv.FormatUint(t.fence, 10)
			code := post(hc, cfg.Store+"/write", url.Values{"hold": {id}, "key": {t.key}, "kind": {t.kind}, "fence": {fence}})
			hist.add(event{E: "write", Hold: id, T: now(), Key: t.key, Fence: t.fence, OK: code == http.StatusOK})
		}
	}
	post(hc, cfg.Store+"/holding", url.Values{"worker": {worker}, "held": {"0"}, "hold": {id}})
}

// runCLI is a worker that holds the lock through `dlock run`: its CMD,
// this program again (runSection), records the acquisition and does the
// writes; a loss reaches it as SIGTERM.
func runCLI(cfg workerConfig, hist *log, running func() bool) error {
	for seq := 0; running(); seq++ {
		id := fmt.Sprintf("%d.%d.%d", cfg.Worker, cfg.Incarnation, seq)
		child := cfg
		child.Section, child.Seed = id, cfg.Seed+uint64(seq)
		raw, err := json.Marshal(child)
		if err != nil {
			return err
		}
		store := []string{"--redis", "redis://" + cfg.Addrs[0]}
		if cfg.Backend == "etcd" {
			store = []string{"--etcd", strings.Join(cfg.Addrs, ",")}
		}
		args := append([]string{"run"}, store...)
		args = append(args, "--prefix", "faults", "--ttl", cfg.TTL.String(), "--wait", cfg.Wait.String(), "--kill-grace", "1s", cfg.Key, "--")
		cmd := exec.Command(cfg.CLI, append(args, cfg.Self...)...)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
		hist.add(started(id, plan{kind: exclusive, keys: []string{cfg.Key}}))
		err = runWatched(cmd, hist)
		code := cmd.ProcessState.ExitCode()
		switch {
		case code == 0:
			hist.add(event{E: "relok", Hold: id, T: now()})
		case code == 75:
			hist.add(event{E: "fail", Hold: id, T: now(), Busy: true, Err: "dlock run: busy"})
		case code == 76:
			hist.add(event{E: "relok", Hold: id, T: now(), Err: "dlock run: lock lost"})
		default:
			hist.add(event{E: "fail", Hold: id, T: now(), Err: fmt.Sprintf("dlock run: exit %d: %v", code, err)})
			time.Sleep(20 * time.Millisecond) // the server is down: pace the retries
		}
	}
	return nil
}

// runWatched runs cmd, a dlock run, and records the time it waited for a
// CPU as a stall of the worker's, which it is: under a heavy load a new
// process takes seconds to start, that the worker's own watcher, which
// needs a CPU for an instant only, does not see.
func runWatched(cmd *exec.Cmd, hist *log) error {
	start := now()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	delay := make(chan int64)
	go func() { delay <- watchRunDelay(cmd.Process.Pid, done) }()
	err := cmd.Wait()
	close(done)
	end := now()
	if d := min(<-delay, end-start); d > 0 {
		hist.add(event{E: "stall", T: end - d, End: end})
	}
	return err
}

// runSection is dlock run's CMD: the critical section of one hold.
func runSection(cfg workerConfig) error {
	hist, err := openLog(cfg)
	if err != nil {
		return err
	}
	defer hist.f.Close()
	if d := runDelay("self"); d > 0 { // this process's start, as runWatched's
		t := now()
		hist.add(event{E: "stall", T: t - d, End: t})
	}
	fence, err := strconv.ParseUint(os.Getenv("DLOCK_FENCE"), 10, 64)
	if err != nil {
		return fmt.Errorf("DLOCK_FENCE: %w", err)
	}
	ts := []target{{cfg.Key, fence, exclusive}}
	hist.add(acquired(cfg.Section, ts))
	lost := make(chan os.Signal, 1)
	signal.Notify(lost, syscall.SIGTERM)
	go func() {
		<-lost // dlock run lost the lock
		hist.add(event{E: "done", Hold: cfg.Section, T: now(), Lost: true})
		os.Exit(1)
	}()
	section(cfg, hist, rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Worker))), cfg.Section, ts, nil, nil)
	hist.add(event{E: "rel", Hold: cfg.Section, T: now()})
	return nil
}

func post(hc *http.Client, u string, form url.Values) int {
	resp, err := hc.Post(u, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// newLocker connects the worker's Locker.
func newLocker(cfg workerConfig) (dlock.Locker, func(), error) {
	opts := []dlock.Option{dlock.WithTTL(cfg.TTL), dlock.WithPrefix(workerPrefix)}
	switch cfg.Backend {
	case "redis":
		redis.SetLogger(quiet{}) // a server that is down is part of the run
		client := redis.NewClient(&redis.Options{Addr: cfg.Addrs[0], DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		l, err := redislock.New(client, opts...)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	case "etcd":
		client, err := clientv3.New(clientv3.Config{Endpoints: cfg.Addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, err
		}
		l, err := etcdlock.New(client, opts...)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	case "cluster":
		redis.SetLogger(quiet{})
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Addrs, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		l, err := redislock.New(client, opts...)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	case "sentinel":
		redis.SetLogger(quiet{})
		client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: cfg.Addrs,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		// A write counts once the replica has it: a failover to the
		// replica then hands no lock to anyone else before its holder
		// knows it lost it.
		if !cfg.NoAck {
			opts = append(opts, redislock.WithReplicaAck(1, 200*time.Millisecond))
		}
		l, err := redislock.New(client, opts...)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	case "redlock":
		redis.SetLogger(quiet{})
		var clients []redis.UniversalClient
		for _, a := range cfg.Addrs {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}))
		}
		closeAll := func() {
			for _, c := range clients {
				c.Close()
			}
		}
		// A node has a quarter of the lease to answer (the default,
		// 100ms, is a loaded machine's scheduling delay).
		l, err := redlock.New(clients, append([]dlock.Option{redlock.WithNodeTimeout(cfg.TTL / 4)}, opts...)...)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		return l, func() { l.Close(); closeAll() }, nil
	case "postgres":
		pc, err := pgxpool.ParseConfig(pgURL(cfg.Addrs[0]))
		if err != nil {
			return nil, nil, err
		}
		// No connect timeout of its own: a connection and a statement
		// take as long as their caller's context lets them (a Lock
		// call's wait, a renewal's lease). A connection's start takes
		// round trips and a new server process: a second, as Redis
		// clients have to dial, is too short under a slow network or a
		// loaded machine, and each attempt that gives up starts the
		// next server process.
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			return nil, nil, err
		}
		// The LISTEN session goes through the worker's proxy too: a
		// holder cut off is cut off from its notifications.
		l, err := postgreslock.New(pool, opts...)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return l, func() { l.Close(); pool.Close() }, nil
	case "none":
		return noLock{}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown backend %q", cfg.Backend)
}

// quiet is a go-redis logger that says nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
