package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/syncbuf"
	"github.com/redis/go-redis/v9"
)

// lacking is a backend whose driver declares the features in absent
// missing, as a driver does through driver.Declarer.
type lacking struct {
	backend
	absent driver.Feature
}

func (l lacking) Unsupported(f driver.Feature) error {
	if f == l.absent {
		return &driver.UnsupportedError{Backend: "test", Feature: f, Reason: "the test took it away"}
	}
	return nil
}

// Every flag and command that needs a feature of the store is refused,
// before CMD runs, on a store whose driver declares that feature missing:
// exit 2 and one line naming the flag, the store, the feature and the
// driver's reason.
func TestFlagsNeedFeatures(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := []string{"--", "touch", marker}
	run := func(flags ...string) []string { return append(append(append([]string{"run"}, flags...), "k"), cmd...) }
	for _, tc := range []struct {
		args    []string
		absent  driver.Feature
		flag    string // the line starts "dlock: FLAG: Redis does not offer"
		feature string
	}{
		{run("--limit", "2"), driver.FeatureSemaphore, "--limit", "semaphores"},
		{run("--shared"), driver.FeatureRWLock, "--shared", "read-write locks"},
		{run("--exclusive"), driver.FeatureRWLock, "--exclusive", "read-write locks"},
		{run("--hold-at-least", "5s"), driver.FeatureLapse, "--hold-at-least", "UnlockAfter"},
		{[]string{"status", "k"}, driver.FeatureInspect, "status", "inspection"},
		{[]string{"ls"}, driver.FeatureInspect, "ls", "inspection"},
		{[]string{"top", "--once"}, driver.FeatureInspect, "top", "inspection"},
		{[]string{"unlock", "--force", "k"}, driver.FeatureInspect, "unlock", "inspection"},
		{[]string{"leader", "k"}, driver.FeatureInspect, "leader", "inspection"},
		{[]string{"leader", "--watch", "k"}, driver.FeatureWatch, "--watch", "watching a key"},
	} {
		res := dlockInEnv(t, tc.args, func(e *env) {
			e.wrapBackend = func(be backend) backend { return lacking{be, tc.absent} }
		})
		want := "dlock: " + tc.flag + ": Redis does not offer " + tc.feature + ": the test took it away"
		if res.code != exitUsage || strings.TrimSuffix(res.stderr, "\n") != want {
			t.Errorf("dlock %q without %v: exit %d, stderr %q; want %d and %q", tc.args, tc.absent, res.code, res.stderr, exitUsage, want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("dlock %q without %v ran CMD", tc.args, tc.absent)
		}
	}
	// A plain run, and --hold-at-least 0, need none of them.
	for _, args := range [][]string{run(), run("--hold-at-least", "0s")} {
		for _, f := range driver.Features {
			os.Remove(marker)
			res := dlockInEnv(t, args, func(e *env) {
				e.wrapBackend = func(be backend) backend { return lacking{be, f} }
			})
			if _, err := os.Stat(marker); res.code != 0 || err != nil {
				t.Errorf("dlock %q without %v: exit %d, stderr %q, CMD ran: %v", args, f, res.code, res.stderr, err == nil)
			}
		}
	}
}

// Redlock's own declarations: --limit is refused with the driver's
// reason before CMD runs; --hold-at-least and leader --watch are refused
// while Redlock lacks UnlockAfter and Watch, and honoured once it has
// them: never accepted and ignored.
func TestRedlockRefusesWhatItLacks(t *testing.T) {
	s, url := redlockServers(t)
	clients := make([]redis.UniversalClient, len(s))
	for i, srv := range s {
		clients[i] = srv.Client(t)
	}
	l := newRedlock(t, clients)
	dir := t.TempDir()

	marker := filepath.Join(dir, "limit")
	res := dlockIn(t, []string{"run", "--redis", url, "--limit", "2", "k", "--", "touch", marker})
	want := "dlock: --limit: Redlock does not offer semaphores: a majority of independent masters cannot bound permits"
	if res.code != exitUsage || !oneLineWith(res.stderr, want) {
		t.Errorf("run --limit on Redlock: exit %d, stderr %q; want %d and %q...", res.code, res.stderr, exitUsage, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("run --limit on Redlock ran CMD")
	}

	marker = filepath.Join(dir, "hold")
	res = dlockIn(t, []string{"run", "--redis", url, "--hold-at-least", "20s", "held", "--", "touch", marker})
	_, ran := os.Stat(marker)
	if err := driver.Supports(l, driver.FeatureLapse); err != nil {
		want := "dlock: --hold-at-least: Redlock does not offer UnlockAfter: "
		if res.code != exitUsage || !oneLineWith(res.stderr, want) || ran == nil {
			t.Errorf("run --hold-at-least on Redlock without UnlockAfter: exit %d, stderr %q, CMD ran: %v; want %d, %q..., CMD not run",
				res.code, res.stderr, ran == nil, exitUsage, want)
		}
	} else {
		info, err := l.Inspect(context.Background(), "held")
		if res.code != 0 || ran != nil || err != nil || !info.Held {
			t.Errorf("run --hold-at-least 20s on Redlock: exit %d, stderr %q, CMD ran: %v; then %+v, %v: want the key still held",
				res.code, res.stderr, ran == nil, info, err)
		}
	}

	var out syncbuf.Buffer
	sigs := make(chan os.Signal, 1)
	done := make(chan result, 1)
	go func() {
		done <- dlockInEnv(t, []string{"leader", "--redis", url, "--watch", "board"}, func(e *env) {
			e.stdout, e.signals = &out, sigs
		})
	}()
	if err := driver.Supports(l, driver.FeatureWatch); err != nil {
		res := <-done
		want := "dlock: --watch: Redlock does not offer watching a key: "
		if res.code != exitUsage || !oneLineWith(res.stderr, want) || strings.Contains(res.stderr, "main.") {
			t.Errorf("leader --watch on Redlock without Watch: exit %d, stderr %q; want %d and %q...", res.code, res.stderr, exitUsage, want)
		}
		return
	}
	dlocktest.Eventually(t, 10*time.Second, "leader --watch to print the vacancy", func() bool { return strings.Contains(out.String(), "vacant") })
	sigs <- syscall.SIGINT
	if res := <-done; res.code != exitSignal+int(syscall.SIGINT) {
		t.Errorf("leader --watch on Redlock, interrupted: exit %d, stderr %q", res.code, res.stderr)
	}
}

// oneLineWith reports whether stderr is one line that starts with prefix.
func oneLineWith(stderr, prefix string) bool {
	line, ok := strings.CutSuffix(stderr, "\n")
	return ok && !strings.Contains(line, "\n") && strings.HasPrefix(line, prefix)
}
