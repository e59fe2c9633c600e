package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The commands against a PostgreSQL server that the first test needing
// it starts, and TestMain stops.
var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgErr  error
)

// pgURL returns the URL of the shared PostgreSQL server's database
// "postgres", whose tables dlock creates on first use.
func pgURL(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() { pgSrv, pgErr = pgtest.Start(pgtest.Options{}) })
	if pgErr != nil {
		t.Fatalf("pgtest: %v", pgErr)
	}
	return pgSrv.URL("")
}

// pgArgs puts --postgres URL after the command name.
func pgArgs(args ...string) []string {
	return append([]string{args[0], "--postgres", pgSrv.URL("")}, args[1:]...)
}

// newPgLocker returns a Locker on the shared server, its tables created,
// closed when t ends.
func newPgLocker(t *testing.T, opts ...dlock.Option) *postgreslock.Locker {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := postgreslock.New(pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

func pgHeld(t *testing.T, l *postgreslock.Locker, key string) bool {
	t.Helper()
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

// Four dlock processes run five jobs each on one key in PostgreSQL,
// checked as in TestRunMutualExclusion.
func TestPostgresRunMutualExclusion(t *testing.T) {
	newPgLocker(t)
	mutualExclusion(t, 4, 5, pgArgs)
}

func TestPostgresRunLimit(t *testing.T) { runLimit(t, pgArgs, newPgLocker(t)) }

func TestPostgresRunShared(t *testing.T) { runShared(t, pgArgs, newPgLocker(t)) }

// A busy key exits 75 with the holder's lease; CMD gets the fence, which
// is the lock's row counter; the lock is released after CMD ends.
func TestPostgresRunBusy(t *testing.T) {
	ctx := context.Background()
	l := newPgLocker(t)
	lk, err := l.TryLock(ctx, "busy", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res := dlockIn(t, pgArgs("run", "busy", "--", "true"))
	if res.code != exitBusy || !regexp.MustCompile(`^dlock: "busy" is busy; retry after [\d.]+s$`).MatchString(oneLine(t, res.stderr)) {
		t.Fatalf("busy lock: exit %d, stderr %q; want %d and the retry-after hint", res.code, res.stderr, exitBusy)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, pgArgs("run", "busy", "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_FENCE"`))
	if want := "busy " + uintString(lk.Fence()+1) + "\n"; res.code != 0 || res.stdout != want {
		t.Fatalf("run: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	if pgHeld(t, l, "busy") {
		t.Fatal("the lock is still held after CMD ended")
	}
}

// A holder forced out by unlock --force: dlock stops CMD at its next
// renewal and exits 76, and its release leaves the next holder alone.
func TestPostgresRunLostLock(t *testing.T) {
	ctx := context.Background()
	l := newPgLocker(t)
	ready := filepath.Join(t.TempDir(), "ready")
	res := make(chan result, 1)
	go func() {
		res <- dlockIn(t, pgArgs("run", "--ttl", "1s", "lost", "--", "sh", "-c",
			`trap 'exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`, "sh", ready))
	}()
	dlocktest.Eventually(t, 20*time.Second, "CMD to start", func() bool { _, err := os.Stat(ready); return err == nil })
	if r := dlockIn(t, pgArgs("unlock", "--force", "lost")); r.code != 0 {
		t.Fatalf("unlock --force: exit %d, stderr %q", r.code, r.stderr)
	}
	thief, err := l.TryLock(ctx, "lost", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Unlock(ctx)
	select {
	case r := <-res:
		if r.code != exitLost || !strings.Contains(r.stderr, `lost the lock on "lost"`) {
			t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLost, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock did not stop CMD after losing the lock")
	}
	if thief.Err() != nil || !pgHeld(t, l, "lost") {
		t.Fatalf("dlock's release took the new holder's lock: %v", thief.Err())
	}
}

// status, ls and unlock --force on PostgreSQL: the fence of a free key is
// kept, and waiters are counted.
func TestPostgresStatusListUnlock(t *testing.T) {
	t.Parallel() // its own servers, keys or prefix; it waits, not computes
	ctx := context.Background()
	l := newPgLocker(t, dlock.WithPrefix("pgst"))
	args := func(a ...string) []string { return append(pgArgs(a[0], "--prefix", "pgst"), a[1:]...) }

	a, err := l.TryLock(ctx, "job", dlock.WithOwner("deploy-7"), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res := dlockIn(t, args("status", "job"))
	want := regexp.MustCompile(`^KEY +KIND +STATE +OWNER +HOLDS +TTL +FENCE +WAITERS\njob +lock +held +deploy-7 +1 +\d+s +` + uintString(a.Fence()) + ` +0\n$`)
	if res.code != 0 || !want.MatchString(res.stdout) {
		t.Fatalf("status: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	res = dlockIn(t, args("ls", "--json", "j*"))
	var js []lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &js); err != nil || len(js) != 1 || js[0].Key != "job" || js[0].Fence != a.Fence() || js[0].Owner != "deploy-7" {
		t.Fatalf("ls --json: %q (%v)", res.stdout, err)
	}
	res = dlockIn(t, args("unlock", "--force", "job"))
	if want := regexp.MustCompile(`^deleted "job": owner "deploy-7" \(1 holds\), fence ` + uintString(a.Fence()) + `, [\d.]+s of lease left\n$`); res.code != 0 || !want.MatchString(res.stdout) {
		t.Fatalf("unlock --force: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	evicted(t, a)
	res = dlockIn(t, args("unlock", "--force", "job"))
	if res.code != exitFailure || oneLine(t, res.stderr) != `dlock: "job" is not held; nothing deleted` {
		t.Fatalf("unlock --force of a free key: exit %d, stderr %q", res.code, res.stderr)
	}
	res = dlockIn(t, args("status", "--json", "job"))
	var free lockJSON
	if err := unmarshalRow(res.stdout, &free); err != nil || free.Held || free.State != "free" || free.Fence != a.Fence() {
		t.Fatalf("status --json of a released key: %+v, %v; want free with the fence kept", free, err)
	}
}

// DLOCK_POSTGRES_URL chooses PostgreSQL when no flag does; dlock creates
// the tables in a database that has none.
func TestPostgresURLFromEnvironment(t *testing.T) {
	pgURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := pgSrv.CreateDB(ctx, fmt.Sprintf("clienv%d", time.Now().UnixNano())) // a new database, without the tables
	if err != nil {
		t.Fatal(err)
	}
	res := dlockIn(t, []string{"run", "envkey", "--", "true"}, "DLOCK_REDIS_URL=", "DLOCK_POSTGRES_URL="+url)
	if res.code != 0 {
		t.Fatalf("run in a database without the tables: exit %d, stderr %q", res.code, res.stderr)
	}
	res = dlockIn(t, []string{"status", "--json", "envkey"}, "DLOCK_REDIS_URL=", "DLOCK_POSTGRES_URL="+url)
	var j lockJSON
	if err := unmarshalRow(res.stdout, &j); err != nil || j.Held || j.Fence != 1 {
		t.Fatalf("status with DLOCK_POSTGRES_URL: %q, %q (%v); want free with fence 1", res.stdout, res.stderr, err)
	}
}

func TestPostgresBadInput(t *testing.T) {
	url := pgURL(t)
	for _, tc := range []struct {
		args []string
		vars []string
		code int
		want string
	}{
		{[]string{"run", "--postgres", url, "--fair", "k", "--", "true"}, nil, exitUsage, "--fair: PostgreSQL has no fair mode"},
		{[]string{"run", "--redis", redisURL(), "--postgres", url, "k", "--", "true"}, nil, exitUsage, "--redis and --postgres both given"},
		{[]string{"ls", "--etcd", "127.0.0.1:1", "--redis", redisURL(), "--postgres", url}, nil, exitUsage, "--redis, --etcd and --postgres all given"},
		{[]string{"status", "k"}, []string{"DLOCK_POSTGRES_URL=" + url}, exitUsage, "DLOCK_REDIS_URL and DLOCK_POSTGRES_URL both set"},
		{[]string{"status", "--postgres", "mysql://127.0.0.1/x", "k"}, nil, exitUsage, `unknown scheme "mysql"`},
		{[]string{"status", "--postgres", "postgres://u:hunter2@127.0.0.1:notaport/x", "k"}, nil, exitUsage, "bad PostgreSQL URL"},
		{[]string{"status", "--postgres", strings.TrimSuffix(url, "?sslmode=disable") + "x?sslmode=disable", "k"}, nil, exitConfig, "refused the configuration"},
	} {
		res := dlockIn(t, tc.args, tc.vars...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, "hunter2") {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, tc.code, tc.want)
		}
	}
}

// A server where nothing listens: one line naming it, exit 69, within
// the connection timeout.
func TestPostgresUnreachable(t *testing.T) {
	addr := closedPort(t)
	url := "postgres://u:hunter2@" + addr + "/db?connect_timeout=1"
	for _, args := range [][]string{
		{"run", "--postgres", url, "k", "--", "true"},
		{"status", "--postgres", url, "k"},
		{"ls", "--postgres", url},
		{"unlock", "--force", "--postgres", url, "k"},
	} {
		start := time.Now()
		res := dlockIn(t, args)
		line := oneLine(t, res.stderr)
		if res.code != exitUnavailable || !strings.HasPrefix(line, "dlock: cannot reach PostgreSQL at "+addr+"/db: ") || strings.Contains(line, "hunter2") {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and a line naming %s", args, res.code, line, exitUnavailable, addr)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("dlock %q took %v to give up, with a timeout of 1s", args, d)
		}
	}
}
