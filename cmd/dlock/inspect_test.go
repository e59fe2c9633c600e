package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

func TestStatus(t *testing.T) {
	ctx := context.Background()
	prefix := "st" + driver.NewToken()[:6] // a fresh namespace per run, for -count=N
	l := newLocker(t, dlock.WithPrefix(prefix))
	args := func(a ...string) []string { return append([]string{a[0], "--prefix", prefix}, a[1:]...) }

	res := dlockIn(t, args("status", "job"))
	if res.code != 0 || res.stdout != "KEY  KIND  STATE  OWNER  HOLDS  TTL  FENCE  WAITERS\njob  lock  free   -      0      -    0      0\n" {
		t.Fatalf("status of a fresh key: exit %d, stdout %q", res.code, res.stdout)
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
	want := regexp.MustCompile(`^KEY +KIND +STATE +OWNER +HOLDS +TTL +FENCE +WAITERS\njob +lock +held +deploy-7 +2 +\d+(\.\d+)?m?s +` +
		uintString(b.Fence()) + ` +0\n$`)
	if res.code != 0 || !want.MatchString(res.stdout) {
		t.Fatalf("status of an owner's lock: exit %d, stdout %q", res.code, res.stdout)
	}
	if strings.Contains(res.stdout, a.Token()) || strings.Contains(res.stdout, b.Token()) {
		t.Fatal("status printed a token")
	}

	res = dlockIn(t, args("status", "--json", "job"))
	var j lockJSON
	if err := unmarshalRow(res.stdout, &j); err != nil {
		t.Fatalf("status --json: %v in %q", err, res.stdout)
	}
	if !j.Held || j.Owner != "deploy-7" || j.Holds != 2 || j.Fence != b.Fence() || j.TTLms <= 0 || j.TTLms > 20000 || j.Key != "job" {
		t.Fatalf("status --json: %+v", j)
	}
	a.Unlock(ctx)
	b.Unlock(ctx)

	res = dlockIn(t, args("status", "--json", "job"))
	j = lockJSON{}
	if err := unmarshalRow(res.stdout, &j); err != nil || j.Held || j.State != "free" || j.TTLms != 0 || j.Fence != b.Fence() {
		t.Fatalf("status --json of a released key: %+v, %v", j, err)
	}
}

func uintString(n uint64) string { return strconv.FormatUint(n, 10) }

// unmarshalRow reads the one row of status --json into j.
func unmarshalRow(out string, j *lockJSON) error {
	var rows []lockJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return err
	}
	if len(rows) != 1 {
		return fmt.Errorf("%d rows, want 1", len(rows))
	}
	*j = rows[0]
	return nil
}

func TestList(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, dlock.WithPrefix("ls"))
	res := dlockIn(t, []string{"ls", "--prefix", "ls"})
	if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, "no held locks") {
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

	res = dlockIn(t, []string{"ls", "--prefix", "ls"})
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "KEY ") {
		t.Fatalf("ls: exit %d, stdout %q", res.code, res.stdout)
	}
	for i, want := range []string{"cron:a ", "cron:b ", "deploy ", "owned "} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("ls line %d = %q, want it to start with %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[4], " job-1 ") {
		t.Errorf("ls line %q does not name the owner", lines[4])
	}

	res = dlockIn(t, []string{"ls", "--prefix", "ls", "--json", "cron:*"})
	var js []lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &js); err != nil {
		t.Fatalf("ls --json: %v in %q", err, res.stdout)
	}
	if len(js) != 2 || js[0].Key != "cron:a" || js[1].Key != "cron:b" || !js[0].Held || js[0].TTLms <= 0 || js[0].Fence == 0 {
		t.Fatalf("ls --json cron:*: %+v", js)
	}
	res = dlockIn(t, []string{"ls", "--prefix", "ls", "--json", "none*"})
	if res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Fatalf("ls --json with no match: %q, want []", res.stdout)
	}
}

func TestUnlock(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, dlock.WithPrefix("ul"))
	lk, err := l.TryLock(ctx, "stuck", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}

	res := dlockIn(t, []string{"unlock", "--prefix", "ul", "stuck"})
	if res.code != exitUsage || !strings.Contains(res.stderr, "refusing") || !held(t, l, "stuck") {
		t.Fatalf("unlock without --force: exit %d, stderr %q; want %d, a refusal, and the lock kept", res.code, res.stderr, exitUsage)
	}

	res = dlockIn(t, []string{"unlock", "--prefix", "ul", "--force", "stuck"})
	want := `deleted "stuck": a plain lock, fence ` + uintString(lk.Fence()) + `, `
	if res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.HasSuffix(res.stdout, " of lease left\n") {
		t.Fatalf("unlock --force: exit %d, stdout %q; want %q...", res.code, res.stdout, want)
	}
	if held(t, l, "stuck") {
		t.Fatal("the lock is still held after unlock --force")
	}
	evicted(t, lk)

	res = dlockIn(t, []string{"unlock", "--prefix", "ul", "--force", "stuck"})
	if res.code != exitFailure || !strings.Contains(oneLine(t, res.stderr), "not held; nothing deleted") {
		t.Fatalf("unlock --force of a free key: exit %d, stderr %q", res.code, res.stderr)
	}

	if _, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-9")); err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, []string{"unlock", "--prefix", "ul", "--force", "--json", "owned"})
	var j lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &j); err != nil || j.Owner != "deploy-9" || j.Holds != 1 || !j.Held {
		t.Fatalf("unlock --force --json: %q (%v)", res.stdout, err)
	}
}

// evicted fails t unless lk learns within 10s that it lost the lock.
func evicted(t *testing.T, lk dlock.Lock) {
	t.Helper()
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), dlock.ErrLockLost) {
			t.Fatalf("the evicted holder's Err() = %v, want ErrLockLost", lk.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted holder never learned it lost the lock")
	}
}
