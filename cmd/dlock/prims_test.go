package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
)

func TestRunLimit(t *testing.T) {
	runLimit(t, func(args ...string) []string { return args }, newLocker(t))
}

func TestEtcdRunLimit(t *testing.T) { runLimit(t, etcdArgs, newEtcdLocker(t)) }

// run --limit 2: six processes of three jobs each on one key; a job takes
// one of two slots (a directory that must not exist) and fails when both
// are taken, so three jobs at once would fail one. The second slot being
// used shows that two jobs did run at once. Then status and ls show a
// full semaphore, taken through l.
func runLimit(t *testing.T, args func(...string) []string, l dlock.Semaphore) {
	dir := t.TempDir()
	key := "limit-" + driver.NewToken()[:6]
	job := `s=1; mkdir "$1/slot1" 2>/dev/null || { s=2; mkdir "$1/slot2" 2>/dev/null; } || exit 99
echo "$s $DLOCK_FENCE" >> "$1/log"; sleep 0.2; rmdir "$1/slot$s"`
	const procs, rounds = 6, 3
	var wg sync.WaitGroup
	errs := make(chan string, procs)
	for p := range procs {
		wg.Go(func() {
			for r := range rounds {
				res := dlockProc(t, args("run", "--limit", "2", "--wait", "forever", "--ttl", "5s", key, "--", "sh", "-c", job, "sh", dir)...)
				if res.code != 0 {
					errs <- "process " + strconv.Itoa(p) + " round " + strconv.Itoa(r) + ": exit " + strconv.Itoa(res.code) + ": " + res.stderr
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e) // exit 99: three jobs were inside at once
	}
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != procs*rounds {
		t.Fatalf("%d jobs ran, want %d", len(lines), procs*rounds)
	}
	fences := map[string]bool{}
	second := false
	for _, l := range lines {
		slot, fence, _ := strings.Cut(l, " ")
		second = second || slot == "2"
		if fences[fence] || fence == "0" {
			t.Errorf("fence %s twice, or zero: every permit has a fence of its own", fence)
		}
		fences[fence] = true
	}
	if !second {
		t.Error("no two jobs ever ran at once: --limit 2 behaved as a lock")
	}

	// A full semaphore is busy, with the exit code of a busy lock.
	ctx := context.Background()
	for range 2 {
		lk, err := l.TryAcquire(ctx, key, 2, dlock.WithTTL(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
	}
	res := dlockIn(t, args("run", "--limit", "2", key, "--", "true"))
	if res.code != exitBusy || !strings.Contains(res.stderr, "is busy") {
		t.Errorf("a full semaphore: exit %d, stderr %q; want %d and a busy message", res.code, res.stderr, exitBusy)
	}
	res = dlockIn(t, args("status", key))
	if res.code != 0 || !regexp.MustCompile(`\n`+key+` +semaphore +full +- +2/2 `).MatchString(res.stdout) || strings.Contains(res.stdout, "free") {
		t.Errorf("status of a full semaphore: exit %d, stdout %q", res.code, res.stdout)
	}
	res = dlockIn(t, args("ls", "--json", key))
	var list []lockJSON
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || len(list) != 1 || list[0].Kind != "semaphore" || list[0].Holds != 2 || list[0].Limit != 2 {
		t.Errorf("ls --json: %v, %q", err, res.stdout)
	}
	res = dlockIn(t, args("ls", key))
	if res.code != 0 || !strings.Contains(res.stdout, "KIND") || !strings.Contains(res.stdout, "2/2") || !strings.Contains(res.stdout, "semaphore") {
		t.Errorf("ls: exit %d, stdout %q", res.code, res.stdout)
	}
}

func TestRunShared(t *testing.T) {
	runShared(t, func(args ...string) []string { return args }, newLocker(t))
}

func TestEtcdRunShared(t *testing.T) { runShared(t, etcdArgs, newEtcdLocker(t)) }

// run --shared: two readers run at once (each waits for the other to
// start); --exclusive waits for them, and is refused at once with -n.
func runShared(t *testing.T, args func(...string) []string, l dlock.RWLocker) {
	dir := t.TempDir()
	key := "shared-" + driver.NewToken()[:6]
	// Each reader marks that it started, waits (up to 10s) for the other,
	// then for the test to say done.
	reader := func(me, other string) string {
		return `touch "$1/` + me + `"; i=0; while [ ! -e "$1/` + other + `" ]; do i=$((i+1)); [ $i -gt 200 ] && exit 98; sleep 0.05; done
i=0; while [ ! -e "$1/done" ]; do i=$((i+1)); [ $i -gt 200 ] && exit 97; sleep 0.05; done`
	}
	var wg sync.WaitGroup
	codes := make([]result, 2)
	for i, names := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Go(func() {
			codes[i] = dlockProc(t, args("run", "--shared", "--wait", "10s", key, "--", "sh", "-c", reader(names[0], names[1]), "sh", dir)...)
		})
	}
	// While they run, a writer is refused.
	dlocktest.Eventually(t, 10*time.Second, "both readers started", func() bool {
		_, errA := os.Stat(filepath.Join(dir, "a"))
		_, errB := os.Stat(filepath.Join(dir, "b"))
		return errA == nil && errB == nil
	})
	ctx := context.Background()
	res := dlockIn(t, args("run", "--exclusive", "-n", key, "--", "true"))
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, r := range codes {
		if r.code != 0 {
			t.Errorf("reader %d: exit %d (98: the readers did not overlap), stderr %q", i, r.code, r.stderr)
		}
	}
	if res.code != exitBusy {
		t.Errorf("--exclusive while readers hold: exit %d, want %d; stderr %q", res.code, exitBusy, res.stderr)
	}
	// A writer excludes a reader.
	w, err := l.TryWLock(ctx, key, dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, args("run", "--shared", key, "--", "true"))
	if res.code != exitBusy {
		t.Errorf("--shared while a writer holds: exit %d, want %d", res.code, exitBusy)
	}
	res = dlockIn(t, args("status", key))
	if !regexp.MustCompile(`\n`+key+` +rwlock +held +- +1w `).MatchString(res.stdout) || strings.Contains(res.stdout, "free") {
		t.Errorf("status with a writer: %q", res.stdout)
	}
	w.Unlock(ctx)
	res = dlockIn(t, args("run", "--exclusive", key, "--", "true"))
	if res.code != 0 {
		t.Errorf("--exclusive on a free key: exit %d, stderr %q", res.code, res.stderr)
	}
}

// The flags that choose the kind of lock are checked before anything runs.
func TestRunKindUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--limit", "0", "k", "--", "true"}, "--limit 0"},
		{[]string{"run", "--limit", "-3", "k", "--", "true"}, "--limit -3"},
		{[]string{"run", "--limit", "2", "--shared", "k", "--", "true"}, "give one"},
		{[]string{"run", "--shared", "--exclusive", "k", "--", "true"}, "give one"},
	} {
		res := dlockIn(t, tc.args)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}
