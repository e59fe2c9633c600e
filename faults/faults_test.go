package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if WorkerMain() {
		return
	}
	// The fault runs wait on their schedules' timers and on their worker
	// processes, not on this process's CPU: they run side by side (see
	// TestFaults), unless -parallel says otherwise (its default is the
	// number of CPUs).
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(len(shortRuns)+4))
	}
	os.Exit(m.Run())
}

// workerProg is the worker program of a test binary built with the race
// detector: faultcheck, built once without it. A race in a worker process
// would not fail the test (only the test process's races do), and the
// detector slows a process down several times over: a dozen runs of race
// workers side by side test the machine's load more than the locks.
var workerProg struct {
	once sync.Once
	cmd  []string
	err  error
}

// workerCommand is the command line that starts a worker: this test
// binary, or, under the race detector, workerProg.
func workerCommand(t *testing.T) []string {
	t.Helper()
	if !raceEnabled {
		return []string{os.Args[0], "-test.run=^$"}
	}
	workerProg.once.Do(func() {
		bin, err := build("github.com/dlock-go/dlock/faults/cmd/faultcheck")
		workerProg.cmd, workerProg.err = []string{bin}, err
	})
	if workerProg.err != nil {
		t.Fatal(workerProg.err)
	}
	return workerProg.cmd
}

// build builds the command pkg into the user's cache directory, a
// directory for each copy of the sources, where the go command leaves it
// as it is when nothing changed (a link takes seconds on a loaded
// machine), and returns its path.
func build(pkg string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(wd))
	bin := filepath.Join(cache, "dlock-faults", hex.EncodeToString(sum[:8]), path.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// run runs cfg with workerCommand's workers, and fails the test with the
// report when want does not hold.
func run(t *testing.T, cfg Config, want func(*Report) bool) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a fault run takes half a minute")
	}
	cfg.Dir = t.TempDir()
	cfg.Worker = workerCommand(t)
	cfg.Seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("DLOCK_FAULTS_SEED"); s != "" { // replay a run
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DLOCK_FAULTS_SEED=%s: %v", s, err)
		}
		cfg.Seed = seed
	}
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if !want(r) {
		dir, err := r.WriteArtifacts(ArtifactsDir())
		if err != nil {
			dir = fmt.Sprintf("none (%v)", err)
		}
		t.Fatalf("seed %d (replay with DLOCK_FAULTS_SEED=%d); artifacts in %s:\n%s", cfg.Seed, cfg.Seed, dir, r)
	}
	return r
}

// shortRuns are the fault runs of go test: one per backend and primitive,
// each as long as its schedule needs to throw every fault it names once
// (Config.cover). make soak runs the long mixes (soak.sh).
var shortRuns = []struct {
	name string
	cfg  Config
	want func(*Report) bool
}{
	// etcd, three members: holders paused or killed, a member (the
	// leader every other time) stopped; the leader cut off from the
	// other members (which elect another while the workers' clients
	// still reach it), or two members that no longer reach each other,
	// each the third.
	{"etcd/lock", Config{Backend: "etcd", Members: 3, TTL: 2 * time.Second, Faults: []string{PauseHolder, StopMember}}, safe},
	{"etcd/semaphore", Config{Backend: "etcd", Members: 3, TTL: 2 * time.Second, Primitive: PrimSemaphore, Workers: 4, Faults: []string{KillHolder, IsolateLeader}}, safe},
	{"etcd/rwlock", Config{Backend: "etcd", Members: 3, TTL: 2 * time.Second, Primitive: PrimRWLock, Workers: 4, Faults: []string{PauseHolder, PartitionMembers}}, safe},
	{"etcd/multi", Config{Backend: "etcd", Members: 3, TTL: 2 * time.Second, Primitive: PrimMulti, Workers: 4, Faults: []string{KillHolder, StopMember}}, safe},
	// A leader cut off from the servers keeps running: its context is
	// cancelled at its local lease deadline, before another leader is
	// elected (no late loss; etcd's margin is a tenth of the lease, so
	// the order is checked there; Redis's is 1% of it, and is only
	// reported).
	{"etcd/election-cut", Config{Backend: "etcd", Primitive: PrimElection, Workers: 3, TTL: 2 * time.Second, Faults: []string{CutHolder}}, func(r *Report) bool {
		return safe(r) && r.LateLoss == 0
	}},
	// Redis: holders paused past their TTL or killed, the server paused,
	// commands that took effect and whose replies were lost, commands
	// delivered twice.
	{"redis/lock", Config{Backend: "redis", Faults: redisFaults}, safe},
	// dlock run as the holder: the workers run `dlock run`, whose CMD
	// does the writes with DLOCK_FENCE (the test builds the binary).
	{"redis/dlock-run", Config{Backend: "redis", Faults: []string{PauseHolder, KillHolder, CutHolder, LoseReply, RepeatCommand}}, safe},
	// The primitives, under the lock run's faults: four workers for a
	// semaphore of three permits; readers and writers (some
	// downgrading); LockAll over two or three of four keys, which must
	// also never leave a worker stuck.
	{"redis/semaphore", Config{Backend: "redis", Primitive: PrimSemaphore, Workers: 4, Faults: redisFaults}, safe},
	{"redis/rwlock", Config{Backend: "redis", Primitive: PrimRWLock, Workers: 4, Faults: redisFaults}, safe},
	{"redis/multi", Config{Backend: "redis", Primitive: PrimMulti, Workers: 4, Faults: redisFaults}, safe},
	// Redlock over three masters: one of them paused, restarted empty at
	// once (which may cost a hold its quorum), or killed and restarted
	// empty after the restart delay; a holder cut off from a majority of
	// them, lost and repeated replies; the same under an election and
	// RunOnce, which keeps the key for its hold after its job returned.
	{"redlock/lock", Config{Backend: "redlock", Faults: []string{KillHolder, PauseServer, RestartServer, KillServer, CutMajority}}, safe},
	{"redlock/runonce", Config{Backend: "redlock", Primitive: PrimRunOnce, Workers: 3, Faults: []string{KillHolder, PauseHolder, KillServer, CutMajority}}, safe},
	// Sentinel: a forced failover to the replica, which acknowledged
	// every write the workers counted.
	{"sentinel/lock", Config{Backend: "sentinel", Faults: []string{PauseHolder, KillHolder, Failover}}, safe},
	// Cluster, two masters with a replica each: the master of the
	// lock's slot replaced by its replica (CLUSTER FAILOVER), the slot
	// moved to another master with its keys.
	{"cluster/lock", Config{Backend: "cluster", Workers: 3, Faults: []string{PauseHolder, KillHolder, ClusterFailover, MigrateSlot}}, safe},
	// Leader election (package election) over Redlock: each term writes
	// with its epoch. A leader paused past its lease learns of its loss
	// only when it runs again, after its successor began (late loss), and
	// the writes it makes then are refused by the fence. (On one Redis
	// and on etcd with its leader paused: make soak.)
	{"redlock/election", Config{Backend: "redlock", Primitive: PrimElection, Workers: 3, Faults: []string{PauseHolder, LoseReply, RepeatCommand}}, safe},
	// PostgreSQL (postgreslock): the server paused (the postmaster and
	// its processes), killed and recovered on its data (leases outlive
	// the crash), statements that ran and whose replies were lost, a
	// holder cut off; and, on a read-write lock, holders paused, killed or
	// slowed down. Three workers each. (Every fault on every primitive,
	// five workers: make soak.)
	{"postgres/lock", Config{Backend: "postgres", Workers: 3, Faults: []string{PauseServer, KillServer, LoseReply, CutHolder}}, safe},
	{"postgres/rwlock", Config{Backend: "postgres", Primitive: PrimRWLock, Workers: 3, Faults: []string{PauseHolder, SlowHolder, KillHolder}}, safe},
}

// redisFaults are the faults of the Redis runs of the primitives.
var redisFaults = []string{PauseHolder, KillHolder, PauseServer, LoseReply, RepeatCommand}

// TestFaults runs shortRuns side by side: each throws every fault it
// names once, and its history must keep the properties of a safe run.
func TestFaults(t *testing.T) {
	t.Parallel()
	for _, c := range shortRuns {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := c.cfg
			if c.name == "redis/dlock-run" {
				cfg.CLI = buildCLI(t)
			}
			cfg.Duration = cfg.cover()
			r := run(t, cfg, c.want)
			for _, k := range cfg.Faults {
				if !slices.ContainsFunc(r.Schedule, func(f fault) bool { return f.Kind == k }) {
					t.Errorf("the schedule did not throw %s:\n%s", k, r)
				}
			}
		})
	}
}

// The checker sees a lock, a semaphore, a read-write lock and a LockAll
// that exclude nothing: the self-test of the checker, without which a
// clean report would prove nothing.
func TestCheckerSeesNoLock(t *testing.T) {
	t.Parallel()
	for _, p := range []string{PrimLock, PrimSemaphore, PrimRWLock, PrimMulti} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			r := run(t, Config{Backend: "none", Primitive: p, Workers: 5, Duration: 5 * time.Second}, func(r *Report) bool {
				return r.Unsafe > 0 && r.Overlaps > 0 && r.Linearizable == "no" && len(r.Violations) > 0 && len(r.Impasses) > 0
			})
			t.Logf("the linearizability check: %s", r.Impasses[0][:strings.IndexByte(r.Impasses[0], '\n')])
			// What a failing run leaves: the report, the history, and
			// porcupine's visualisation.
			dir, err := r.WriteArtifacts(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{"report.txt": "(lin)", "linearizability.html": "faults", "schedule.json": `"Seed"`, "history/writes.jsonl": `"Accepted"`, "history/worker-0.jsonl": `"acq"`} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !strings.Contains(string(b), want) {
					t.Errorf("artifact %s: %v, want it to contain %q", name, err, want)
				}
			}
		})
	}
}

// buildCLI builds the dlock command (see build).
func buildCLI(t *testing.T) string {
	cli, err := build("github.com/dlock-go/dlock/cmd/dlock")
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func safe(r *Report) bool { return r.OK() && r.Holds > 0 }

// A run with a fault that does not apply to its backend, an unknown
// backend or primitive, or a primitive its backend or dlock run cannot
// take, is refused before anything starts.
func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: "etcd", Faults: []string{PauseServer}},
		{Backend: "etcd", Faults: []string{LoseReply}}, // the proxy reads Redis's protocol only
		{Backend: "redis", Faults: []string{"bogus"}},
		{Backend: "zookeeper"},
		{Backend: "redis"}, // no duration
		{Backend: "redis", Duration: time.Second, Primitive: "barrier"},
		{Backend: "redis", Duration: time.Second, Primitive: PrimSemaphore, Limit: -1},
		{Backend: "redis", Duration: time.Second, Primitive: PrimMulti, CLI: "dlock"},
		{Backend: "none", Primitive: PrimElection},
		{Backend: "etcd", Faults: []string{IsolateLeader}}, // one member
		{Backend: "postgres", Faults: []string{RepeatCommand}},
		{Backend: "postgres", Faults: []string{RestartServer}}, // PostgreSQL keeps its data
		{Backend: "postgres", Duration: time.Second, CLI: "dlock"},
	} {
		if cfg.Duration == 0 && cfg.Backend != "redis" {
			cfg.Duration = time.Second
		}
		cfg.Dir, cfg.Worker = t.TempDir(), []string{os.Args[0]}
		if r, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v ran: %v", cfg, r)
		}
	}
}
