package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if WorkerMain() {
		return
	}
	os.Exit(m.Run())
}

// run runs cfg with this test binary as the workers, and fails the test
// with the report when want does not hold.
func run(t *testing.T, cfg Config, want func(*Report) bool) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a fault run takes half a minute")
	}
	cfg.Dir = t.TempDir()
	cfg.Worker = []string{os.Args[0], "-test.run=^$"}
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
		t.Fatalf("seed %d (replay with DLOCK_FAULTS_SEED=%d):\n%s", cfg.Seed, cfg.Seed, r)
	}
	return r
}

// The checker sees a lock, a semaphore, a read-write lock and a LockAll
// that exclude nothing: the self-test of the checker, without which a
// clean report would prove nothing.
func TestCheckerSeesNoLock(t *testing.T) {
	for _, p := range []string{PrimLock, PrimSemaphore, PrimRWLock, PrimMulti} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			run(t, Config{Backend: "none", Primitive: p, Workers: 5, Duration: 3 * time.Second}, func(r *Report) bool {
				return r.Unsafe > 0 && r.Overlaps > 0 && len(r.Violations) > 0
			})
		})
	}
}

// Redis: holders paused past their TTL or killed, the server paused.
func TestRedisFaults(t *testing.T) {
	run(t, Config{Backend: "redis", Duration: 25 * time.Second, Faults: []string{PauseHolder, KillHolder, PauseServer}}, safe)
}

// etcd, three members: holders paused or killed, a member (the leader
// every other time) stopped.
func TestEtcdFaults(t *testing.T) {
	run(t, Config{Backend: "etcd", Members: 3, TTL: 2 * time.Second, Duration: 30 * time.Second, Faults: []string{PauseHolder, KillHolder, StopMember}}, safe)
}

func safe(r *Report) bool { return r.OK() && r.Holds > 0 }

// A run with a fault that does not apply to its backend, an unknown
// backend or primitive, or a primitive its backend or dlock run cannot
// take, is refused before anything starts.
func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: "etcd", Faults: []string{PauseServer}},
		{Backend: "redis", Faults: []string{"bogus"}},
		{Backend: "zookeeper"},
		{Backend: "redis"}, // no duration
		{Backend: "redis", Duration: time.Second, Primitive: "barrier"},
		{Backend: "redis", Duration: time.Second, Primitive: PrimSemaphore, Limit: -1},
		{Backend: "redis", Duration: time.Second, Primitive: PrimMulti, CLI: "dlock"},
		{Backend: "none", Primitive: PrimElection},
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

// dlock run as the holder: the workers run `dlock run`, whose CMD does
// the writes with DLOCK_FENCE.
func TestRedisRunFaults(t *testing.T) {
	cli := filepath.Join(t.TempDir(), "dlock")
	if out, err := exec.Command("go", "build", "-o", cli, "github.com/dlock-go/dlock/cmd/dlock").CombinedOutput(); err != nil {
		t.Fatalf("build dlock: %v\n%s", err, out)
	}
	run(t, Config{Backend: "redis", CLI: cli, Duration: 20 * time.Second, Faults: []string{PauseHolder, KillHolder, CutHolder}}, safe)
}

// Leader election (package election) under faults. Each term writes with
// its epoch, and the checker reads the history:
//
//   - a leader paused past its lease (SIGSTOP) learns of its loss only when
//     it runs again, after its successor began (late loss), and the writes
//     it makes then are refused by the fence, never accepted out of turn;
//   - a leader cut off from the servers keeps running: its context is
//     cancelled at its local lease deadline, before another leader is
//     elected (no late loss; etcd's margin is a tenth of the lease, so the
//     order is checked there; Redis's is 1% of it, and is only reported).
func TestElectionFaults(t *testing.T) {
	t.Run("redis-pause", func(t *testing.T) {
		run(t, Config{Backend: "redis", Primitive: PrimElection, Workers: 3, Duration: 10 * time.Second, Faults: []string{PauseHolder}}, safe)
	})
	t.Run("etcd-pause", func(t *testing.T) {
		run(t, Config{Backend: "etcd", Primitive: PrimElection, Workers: 3, TTL: 2 * time.Second, Duration: 12 * time.Second, Faults: []string{PauseHolder}}, safe)
	})
	t.Run("etcd-cut", func(t *testing.T) {
		run(t, Config{Backend: "etcd", Primitive: PrimElection, Workers: 3, TTL: 2 * time.Second, Duration: 12 * time.Second, Faults: []string{CutHolder}}, func(r *Report) bool {
			return safe(r) && r.LateLoss == 0
		})
	})
}

// The primitives on Redis, under the lock runs' faults: five workers for
// a semaphore of three permits; readers and writers (some downgrading);
// LockAll over two or three of four keys, which must also never leave a
// worker stuck.
func TestRedisPrimitives(t *testing.T) {
	faults := []string{PauseHolder, KillHolder, PauseServer}
	for _, p := range []string{PrimSemaphore, PrimRWLock, PrimMulti} {
		t.Run(p, func(t *testing.T) {
			run(t, Config{Backend: "redis", Primitive: p, Workers: 5, Duration: 8 * time.Second, Faults: faults}, safe)
		})
	}
}

// The semaphore, the read-write lock and LockAll on etcd, three members,
// under the lock run's faults.
func TestEtcdPrimitives(t *testing.T) {
	faults := []string{PauseHolder, KillHolder, StopMember}
	for _, p := range []string{PrimSemaphore, PrimRWLock, PrimMulti} {
		t.Run(p, func(t *testing.T) {
			run(t, Config{Backend: "etcd", Members: 3, Primitive: p, Workers: 5, TTL: 2 * time.Second, Duration: 10 * time.Second, Faults: faults}, safe)
		})
	}
}
