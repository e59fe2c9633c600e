package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The same commands as the Redis tests, against the embedded etcd server
// that TestMain starts.

func etcdEndpoints() string { return strings.Join(etcdSrv.Endpoints(), ",") }

// newEtcdLocker returns a Locker on the shared etcd server, closed when t
// ends.
func newEtcdLocker(t *testing.T, opts ...dlock.Option) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(etcdSrv.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func etcdHeld(t *testing.T, l *etcdlock.Locker, key string) bool {
	t.Helper()
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

// etcdArgs puts --etcd ENDPOINTS after the command name.
func etcdArgs(args ...string) []string {
	return append([]string{args[0], "--etcd", etcdEndpoints()}, args[1:]...)
}

// Four dlock processes run five jobs each on one etcd key, checked as in
// TestRunMutualExclusion.
func TestEtcdRunMutualExclusion(t *testing.T) {
	mutualExclusion(t, 4, 5, etcdArgs)
}

func TestEtcdRunBusy(t *testing.T) {
	l := newEtcdLocker(t)
	lk, err := l.TryLock(context.Background(), "busy", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())

	res := dlockIn(t, etcdArgs("run", "busy", "--", "true"))
	if res.code != exitBusy {
		t.Fatalf("busy lock: exit %d, want %d; stderr %q", res.code, exitBusy, res.stderr)
	}
	if line := oneLine(t, res.stderr); !regexp.MustCompile(`^dlock: "busy" is busy; retry after \d+s$`).MatchString(line) {
		t.Errorf("busy message %q: want the key and a retry-after hint", line)
	}

	start := time.Now()
	res = dlockProc(t, etcdArgs("run", "--wait", "300ms", "busy", "--", "true")...)
	if res.code != exitBusy {
		t.Fatalf("--wait 300ms on a busy lock: exit %d, want %d; stderr %q", res.code, exitBusy, res.stderr)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("--wait 300ms gave up after %v", waited)
	}
	if line := oneLine(t, res.stderr); !strings.Contains(line, `"busy" is still busy after waiting`) || !strings.Contains(line, "retry after") {
		t.Errorf("wait-timeout message %q", line)
	}
}

func TestEtcdRunExitCodes(t *testing.T) {
	l := newEtcdLocker(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -9 $$", exitSignal + 9},
	} {
		res := dlockIn(t, etcdArgs("run", "codes", "--", "sh", "-c", tc.script))
		if res.code != tc.want {
			t.Errorf("CMD %q: exit %d, want %d (stderr %q)", tc.script, res.code, tc.want, res.stderr)
		}
		if etcdHeld(t, l, "codes") {
			t.Fatalf("after CMD %q the lock is still held", tc.script)
		}
	}
	res := dlockIn(t, etcdArgs("run", "env", "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_FENCE ${#DLOCK_TOKEN}"`))
	f := strings.Fields(res.stdout)
	if res.code != 0 || len(f) != 3 || f[0] != "env" || f[1] == "0" || f[2] != "22" {
		t.Fatalf("CMD's environment: got %q (exit %d), want DLOCK_KEY=env, a fence and a 22-character token", res.stdout, res.code)
	}
}

// A fractional --ttl is rounded up to whole seconds, as the driver does.
func TestEtcdRunRoundsTTLUp(t *testing.T) {
	ctx := context.Background()
	cli := etcdSrv.Client(t)
	dir := t.TempDir()
	res := make(chan result, 1)
	go func() {
		res <- dlockIn(t, etcdArgs("run", "--ttl", "1500ms", "round", "--", "sh", "-c",
			`touch "$1/ready"; while [ ! -e "$1/stop" ]; do sleep 0.05; done`, "sh", dir))
	}()
	dlocktest.Eventually(t, 20*time.Second, "CMD to start", func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil })
	resp, err := cli.Get(ctx, "dlock/lock/round/", clientv3.WithPrefix()) // the layout etcdlock documents
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the hold of round: %v, %d keys", err, len(resp.Kvs))
	}
	lease, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || lease.GrantedTTL != 2 {
		t.Errorf("--ttl 1500ms: lease of %ds (%v), want 2s", lease.GrantedTTL, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock did not finish after CMD was told to stop")
	}
}

// Another client deletes the hold: dlock stops CMD and exits 76, and its
// release leaves the next holder alone.
func TestEtcdRunLostLock(t *testing.T) {
	ctx := context.Background()
	l := newEtcdLocker(t)
	cli := etcdSrv.Client(t)
	ready := filepath.Join(t.TempDir(), "ready")
	res := make(chan result, 1)
	go func() {
		res <- dlockIn(t, etcdArgs("run", "--ttl", "2s", "lost", "--", "sh", "-c",
			`trap 'exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`, "sh", ready))
	}()
	dlocktest.Eventually(t, 20*time.Second, "CMD to start", func() bool { _, err := os.Stat(ready); return err == nil })
	del, err := cli.Delete(ctx, "dlock/lock/lost/", clientv3.WithPrefix())
	if err != nil || del.Deleted != 1 {
		t.Fatalf("delete the hold: %v, %d deleted", err, del.Deleted)
	}
	thief, err := l.TryLock(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Unlock(ctx)
	select {
	case r := <-res:
		if r.code != exitLost {
			t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLost, r.stderr)
		}
		if !strings.Contains(r.stderr, `lost the lock on "lost" (its lease ran out or someone deleted it); stopping sh: SIGTERM`) {
			t.Fatalf("stderr %q: want the loss, its reason and SIGTERM", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock did not stop CMD after losing the lock")
	}
	if thief.Err() != nil || !etcdHeld(t, l, "lost") {
		t.Fatalf("dlock's release took the new holder's lock: %v", thief.Err())
	}
}

func TestEtcdStatus(t *testing.T) {
	ctx := context.Background()
	l := newEtcdLocker(t, dlock.WithPrefix("st"))
	args := func(a ...string) []string { return append(etcdArgs(a[0], "--prefix", "st"), a[1:]...) }

	res := dlockIn(t, args("status", "job"))
	if want := "KEY  KIND  STATE  OWNER  HOLDS  TTL  FENCE  WAITERS\njob  lock  free   -      0      -    -      -\n"; res.code != 0 || res.stdout != want {
		t.Fatalf("status of a free key: exit %d, stdout %q, want %q", res.code, res.stdout, want)
	}

	a, err := l.TryLock(ctx, "job", dlock.WithOwner("deploy-7"), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryLock(ctx, "job", dlock.WithOwner("deploy-7"), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, args("status", "job"))
	want := regexp.MustCompile(`^KEY +KIND +STATE +OWNER +HOLDS +TTL +FENCE +WAITERS\njob +lock +held +deploy-7 +2 +\d+s +` +
		uintString(b.Fence()) + ` +-\n$`)
	if res.code != 0 || !want.MatchString(res.stdout) {
		t.Fatalf("status of an owner's lock: exit %d, stdout %q", res.code, res.stdout)
	}
	if strings.Contains(res.stdout, a.Token()) || strings.Contains(res.stdout, b.Token()) {
		t.Fatal("status printed a token")
	}

	res = dlockIn(t, args("status", "--json", "job"))
	var js []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &js); err != nil || len(js) != 1 {
		t.Fatalf("status --json: %v in %q", err, res.stdout)
	}
	j := js[0]
	if j["held"] != true || j["owner"] != "deploy-7" || j["holds"] != 2.0 || j["fence"] != float64(b.Fence()) || j["key"] != "job" {
		t.Fatalf("status --json: %v", j)
	}
	if ttl, _ := j["ttl_ms"].(float64); ttl <= 0 || ttl > 20000 {
		t.Fatalf("status --json: ttl_ms %v, want in (0, 20000]", j["ttl_ms"])
	}
	if _, ok := j["waiters"]; ok {
		t.Fatalf("status --json: %v: etcd does not count waiters, so the field must be absent", j)
	}
	a.Unlock(ctx)
	b.Unlock(ctx)
	res = dlockIn(t, args("status", "--json", "job"))
	var free lockJSON
	if err := unmarshalRow(res.stdout, &free); err != nil || free.Held || free.State != "free" || free.TTLms != 0 || free.Fence != 0 {
		t.Fatalf("status --json of a released key: %+v, %v", free, err)
	}
}

func TestEtcdList(t *testing.T) {
	ctx := context.Background()
	l := newEtcdLocker(t, dlock.WithPrefix("ls"))
	res := dlockIn(t, etcdArgs("ls", "--prefix", "ls"))
	if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, `no held locks match "*" under prefix "ls"`) {
		t.Fatalf("ls with nothing held: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	for _, k := range []string{"cron:b", "cron:a", "deploy"} {
		if _, err := l.TryLock(ctx, k, dlock.WithTTL(20*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TryLock(ctx, "owned", dlock.WithOwner("job-1")); err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, etcdArgs("ls", "--prefix", "ls"))
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 5 || !regexp.MustCompile(`^KEY +KIND +STATE +OWNER +HOLDS +TTL +FENCE +WAITERS$`).MatchString(lines[0]) {
		t.Fatalf("ls: exit %d, stdout %q", res.code, res.stdout)
	}
	for i, want := range []string{`^cron:a +lock +held +- +1 +\d+s +\d+ +-$`, `^cron:b `, `^deploy `, `^owned +lock +held +job-1 +1 +\d+(\.\d)?s +\d+ +-$`} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("ls line %d = %q, want it to match %q", i+1, lines[i+1], want)
		}
	}

	res = dlockIn(t, etcdArgs("ls", "--prefix", "ls", "--json", "cron:*"))
	var js []lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &js); err != nil {
		t.Fatalf("ls --json: %v in %q", err, res.stdout)
	}
	if len(js) != 2 || js[0].Key != "cron:a" || js[1].Key != "cron:b" || !js[0].Held || js[0].TTLms <= 0 || js[0].Fence == 0 || js[0].Waiters != nil {
		t.Fatalf("ls --json cron:*: %+v", js)
	}
	res = dlockIn(t, etcdArgs("ls", "--prefix", "ls", "--json", "none*"))
	if res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Fatalf("ls --json with no match: %q, want []", res.stdout)
	}
	res = dlockIn(t, etcdArgs("ls", "--prefix", "ls", "cron:[ab"))
	if res.code != exitUsage || !strings.Contains(res.stderr, "PATTERN") || !strings.Contains(res.stderr, "unclosed [") {
		t.Fatalf("ls with a malformed pattern: exit %d, stderr %q; want %d", res.code, res.stderr, exitUsage)
	}
}

func TestEtcdUnlock(t *testing.T) {
	ctx := context.Background()
	l := newEtcdLocker(t, dlock.WithPrefix("ul"))
	lk, err := l.TryLock(ctx, "stuck", dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res := dlockIn(t, etcdArgs("unlock", "--prefix", "ul", "stuck"))
	if res.code != exitUsage || !strings.Contains(res.stderr, "refusing") || !etcdHeld(t, l, "stuck") {
		t.Fatalf("unlock without --force: exit %d, stderr %q; want %d, a refusal, and the lock kept", res.code, res.stderr, exitUsage)
	}
	res = dlockIn(t, etcdArgs("unlock", "--prefix", "ul", "--force", "stuck"))
	want := regexp.MustCompile(`^deleted "stuck": a plain lock, fence ` + uintString(lk.Fence()) + `, \d+s of lease left\n$`)
	if res.code != 0 || !want.MatchString(res.stdout) {
		t.Fatalf("unlock --force: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if etcdHeld(t, l, "stuck") {
		t.Fatal("the lock is still held after unlock --force")
	}
	evicted(t, lk)
	res = dlockIn(t, etcdArgs("unlock", "--prefix", "ul", "--force", "stuck"))
	if res.code != exitFailure || oneLine(t, res.stderr) != `dlock: "stuck" is not held; nothing deleted` {
		t.Fatalf("unlock --force of a free key: exit %d, stderr %q", res.code, res.stderr)
	}
	for range 2 {
		if _, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-9")); err != nil {
			t.Fatal(err)
		}
	}
	res = dlockIn(t, etcdArgs("unlock", "--prefix", "ul", "--force", "--json", "owned"))
	var j lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &j); err != nil || j.Owner != "deploy-9" || j.Holds != 2 || !j.Held || j.Fence == 0 {
		t.Fatalf("unlock --force --json: %q (%v)", res.stdout, err)
	}
}

// Endpoints where nothing listens: one line naming them, exit 69, within
// the dial timeout.
func TestEtcdUnreachable(t *testing.T) {
	eps := "http://" + closedPort(t) + "," + closedPort(t)
	for _, args := range [][]string{
		{"run", "--etcd", eps, "k", "--", "true"},
		{"status", "--etcd", eps, "k"},
		{"ls", "--etcd", eps},
		{"unlock", "--force", "--etcd", eps, "k"},
		{"status", "k"}, // from DLOCK_ETCD_ENDPOINTS
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := dlockIn(t, args, "DLOCK_REDIS_URL=", "DLOCK_ETCD_ENDPOINTS="+eps, "DLOCK_ETCD_DIAL_TIMEOUT=1s")
			line := oneLine(t, res.stderr)
			if res.code != exitUnavailable || line != "dlock: cannot reach etcd at "+eps+": no answer within 1s" {
				t.Errorf("dlock %q: exit %d, stderr %q; want %d and a line naming %s", args, res.code, line, exitUnavailable, eps)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("dlock %q took %v to give up, with a dial timeout of 1s", args, d)
			}
		})
	}
}

// DLOCK_ETCD_ENDPOINTS chooses etcd when no flag does.
func TestEtcdEndpointsFromEnvironment(t *testing.T) {
	l := newEtcdLocker(t)
	lk, err := l.TryLock(context.Background(), "envkey")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	res := dlockIn(t, []string{"status", "--json", "envkey"}, "DLOCK_REDIS_URL=", "DLOCK_ETCD_ENDPOINTS="+etcdEndpoints())
	var j lockJSON
	if err := unmarshalRow(res.stdout, &j); err != nil || !j.Held || j.Fence != lk.Fence() {
		t.Fatalf("status with DLOCK_ETCD_ENDPOINTS: %q, %q (%v)", res.stdout, res.stderr, err)
	}
}

func TestEtcdBadInput(t *testing.T) {
	eps := etcdEndpoints()
	for _, tc := range []struct {
		args []string
		vars []string
		want string
	}{
		{[]string{"run", "--etcd", eps, "--ttl", "500ms", "k", "--", "true"}, nil, "--ttl 500ms: etcd leases are whole seconds, so it must be at least 1s"},
		{[]string{"run", "--etcd", eps, "--ttl", "50ms", "k", "--", "true"}, nil, "whole seconds"},
		{[]string{"run", "--etcd", eps, "--fair", "k", "--", "true"}, nil, "--fair: etcd has no fair mode"},
		{[]string{"run", "--redis", redisURL(), "--etcd", eps, "k", "--", "true"}, nil, "--redis and --etcd both given"},
		{[]string{"status", "--redis", redisURL(), "--etcd", eps, "k"}, nil, "--redis and --etcd both given"},
		{[]string{"status", "k"}, []string{"DLOCK_ETCD_ENDPOINTS=" + eps}, "DLOCK_REDIS_URL and DLOCK_ETCD_ENDPOINTS both set"},
		{[]string{"status", "--etcd", "127.0.0.1", "k"}, nil, `bad etcd endpoint "127.0.0.1": no port`},
		{[]string{"status", "--etcd", eps + ",", "k"}, nil, `bad etcd endpoint "": empty`},
		{[]string{"ls", "--etcd", "ftp://127.0.0.1:1"}, nil, `unknown scheme "ftp"`},
		{[]string{"ls", "--etcd", "http://u:pw@127.0.0.1:1"}, nil, "only scheme, host and port"},
		{[]string{"ls", "--etcd", eps}, []string{"DLOCK_ETCD_DIAL_TIMEOUT=soon"}, "DLOCK_ETCD_DIAL_TIMEOUT=soon"},
	} {
		res := dlockIn(t, tc.args, tc.vars...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

// dlock cut off from etcd while CMD runs: the lease deadline passes, dlock
// says etcd could not be reached, stops CMD and exits 76.
func TestEtcdRunPartitioned(t *testing.T) {
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(etcdSrv.Endpoint(0), "http://"))
	ready := filepath.Join(t.TempDir(), "ready")
	res := make(chan result, 1)
	go func() {
		res <- dlockIn(t, []string{"run", "--etcd", proxy.Addr(), "--ttl", "2s", "cut", "--", "sh", "-c",
			`trap 'exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`, "sh", ready})
	}()
	dlocktest.Eventually(t, 20*time.Second, "CMD to start", func() bool { _, err := os.Stat(ready); return err == nil })
	proxy.Cut()
	defer proxy.Heal()
	select {
	case r := <-res:
		if r.code != exitLost {
			t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLost, r.stderr)
		}
		if !strings.Contains(r.stderr, `lost the lock on "cut" (etcd could not be reached to renew it before its lease ended)`) {
			t.Fatalf("stderr %q: want the loss and its reason", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock did not stop CMD after its lease ran out")
	}
}
