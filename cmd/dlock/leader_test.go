package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/election"
)

// A cron job fired on three hosts, the later two a little after the first
// (their clocks lag): with --hold-at-least, it runs once per tick, and
// the process that ran it exits as soon as the job is done.
func TestRunHoldAtLeastOncePerTick(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	const hold = 2 * time.Second
	key := "cron-job-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tick := func(n int) {
		t.Helper()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			codes []int
		)
		for host := range 3 {
			wg.Go(func() {
				time.Sleep(time.Duration(host) * 200 * time.Millisecond) // the host's clock lags
				start := time.Now()
				res := dlockProc(t, "run", "--hold-at-least", hold.String(), key, "--", "sh", "-c", `echo "$1" >> "$2"`, "sh", strconv.Itoa(n), log)
				if res.code == 0 && time.Since(start) >= hold {
					t.Errorf("tick %d: dlock run took %v: it waited out the hold instead of leaving the lock to lapse", n, time.Since(start))
				}
				mu.Lock()
				codes = append(codes, res.code)
				mu.Unlock()
			})
		}
		wg.Wait()
		ran := 0
		for _, c := range codes {
			switch c {
			case 0:
				ran++
			case exitBusy:
			default:
				t.Fatalf("tick %d: exit codes %v, want one 0 and the others %d", n, codes, exitBusy)
			}
		}
		if ran != 1 {
			t.Fatalf("tick %d: exit codes %v: ran %d times, want once", n, codes, ran)
		}
	}
	tick(1)
	l := newLocker(t)
	if info, err := l.Inspect(context.Background(), key); err != nil || !info.Held || info.TTL > hold {
		t.Fatalf("after the tick: %+v, %v; want the key held for at most %v more", info, err, hold)
	}
	dlocktest.Eventually(t, 10*time.Second, "the hold to lapse", func() bool {
		info, err := l.Inspect(context.Background(), key)
		return err == nil && !info.Held
	})
	tick(2)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "1 2" {
		t.Errorf("the job ran at ticks %v, want 1 2", got)
	}
}

func TestLeader(t *testing.T) {
	ctx := context.Background()
	key := "leader-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if res := dlockIn(t, []string{"leader", key}); res.code != 0 || res.stdout != "vacant\n" {
		t.Fatalf("leader of a vacant election: exit %d, %q, %q", res.code, res.stdout, res.stderr)
	}
	e, err := election.New(newLocker(t, dlock.WithTTL(5*time.Second)), key)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := e.Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	want := "10.0.0.7:8080\tepoch " + strconv.FormatUint(ld.Epoch(), 10) + "\n"
	if res := dlockIn(t, []string{"leader", key}); res.code != 0 || res.stdout != want {
		t.Fatalf("leader: exit %d, %q, %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	res := dlockIn(t, []string{"leader", "--json", key})
	var j leaderJSON
	if err := json.Unmarshal([]byte(res.stdout), &j); err != nil || !j.Elected || j.Value != "10.0.0.7:8080" || j.Epoch != ld.Epoch() || j.Key != key {
		t.Fatalf("leader --json: %q (%v)", res.stdout, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if res := dlockIn(t, []string{"leader"}); res.code != exitUsage {
		t.Errorf("leader without KEY: exit %d, want %d", res.code, exitUsage)
	}
}

// dlock leader --watch prints the leader, then each change, vacancy
// included, and exits 128+2 on SIGINT.
func TestLeaderWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "watch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.CommandContext(ctx, binPath, "leader", "--watch", key)
	cmd.Env = append(os.Environ(), "DLOCK_REDIS_URL="+redisURL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: dlock leader --watch ended", what)
			}
			_, rest, _ := strings.Cut(l, "\t") // the time it was seen
			return rest
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no line for 15s", what)
		}
		return ""
	}
	if l := next("at start"); l != "vacant" {
		t.Fatalf("at start: %q, want vacant", l)
	}
	e, err := election.New(newLocker(t, dlock.WithTTL(5*time.Second)), key)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"alpha", "beta"} {
		ld, err := e.Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		if l, want := next(value+" elected"), value+"\tepoch "+strconv.FormatUint(ld.Epoch(), 10); l != want {
			t.Fatalf("%s elected: %q, want %q", value, l, want)
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if l := next(value + " resigned"); l != "vacant" {
			t.Fatalf("%s resigned: %q, want vacant", value, l)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	for range lines {
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitSignal+int(syscall.SIGINT) {
		t.Errorf("exit %d after SIGINT, want %d", code, exitSignal+int(syscall.SIGINT))
	}
}
