package faults

import (
	"os"
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
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if !want(r) {
		t.Fatalf("seed %d:\n%s", cfg.Seed, r)
	}
	return r
}

// The checker sees a lock that excludes nothing: the self-test of the
// checker, without which a clean report would prove nothing.
func TestCheckerSeesNoLock(t *testing.T) {
	run(t, Config{Backend: "none", Duration: 3 * time.Second}, func(r *Report) bool {
		return r.Unsafe > 0 && r.Overlaps > 0 && len(r.Violations) > 0
	})
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

// A run with a fault that does not apply to its backend, or an unknown
// backend, is refused before anything starts.
func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: "etcd", Faults: []string{PauseServer}},
		{Backend: "redis", Faults: []string{"bogus"}},
		{Backend: "zookeeper"},
		{Backend: "redis"}, // no duration
	} {
		if cfg.Duration == 0 && cfg.Backend != "redis" {
			cfg.Duration = time.Second
		}
		cfg.Dir, cfg.Worker = t.TempDir(), []string{os.Args[0]}
		if r, err := Run(cfg); err == nil {
			t.Errorf("%+v ran: %v", cfg, r)
		}
	}
}
