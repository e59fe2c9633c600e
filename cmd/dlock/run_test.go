package main

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/dlock-go/dlock/internal/syncbuf"
)

// Eight dlock processes run twenty jobs each on one key.
func TestRunMutualExclusion(t *testing.T) {
	mutualExclusion(t, 8, 20, func(args ...string) []string { return args })
}

// mutualExclusion runs procs dlock processes of rounds jobs each on one key,
// with args adding the backend's flags to a command line. A job makes a
// directory that must not exist (mkdir fails if another job is inside),
// appends its fence to a log and removes the directory: every job must
// succeed, and the fences must rise.
func mutualExclusion(t *testing.T, procs, rounds int, args func(...string) []string) {
	dir := t.TempDir()
	job := `mkdir "$1/inside" || exit 99; echo "$DLOCK_FENCE" >> "$1/fences"; rmdir "$1/inside"`
	var wg sync.WaitGroup
	errs := make(chan string, procs)
	for p := range procs {
		wg.Go(func() {
			for r := range rounds {
				res := dlockProc(t, args("run", "--wait", "forever", "--ttl", "5s", "mutex", "--", "sh", "-c", job, "sh", dir)...)
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
		t.Error(e) // exit 99 means two jobs were inside at once
	}
	b, err := os.ReadFile(filepath.Join(dir, "fences"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != procs*rounds {
		t.Fatalf("%d jobs ran, want %d", len(lines), procs*rounds)
	}
	prev := uint64(0)
	for i, l := range lines {
		f, err := strconv.ParseUint(l, 10, 64)
		if err != nil || f <= prev {
			t.Fatalf("job %d ran with DLOCK_FENCE=%q after fence %d: fences must rise", i, l, prev)
		}
		prev = f
	}
}

func TestRunBusy(t *testing.T) {
	l := newLocker(t)
	lk, err := l.TryLock(context.Background(), "busy", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())

	res := dlockIn(t, []string{"run", "busy", "--", "true"})
	if res.code != exitBusy {
		t.Fatalf("busy lock: exit %d, want %d; stderr %q", res.code, exitBusy, res.stderr)
	}
	line := oneLine(t, res.stderr)
	if !strings.Contains(line, `"busy" is busy; retry after `) || strings.Contains(line, "\r") {
		t.Errorf("busy message %q: want the key and a retry-after hint, and no status line", line)
	}

	res = dlockIn(t, []string{"run", "--conflict-exit-code", "9", "busy", "true"})
	if res.code != 9 {
		t.Errorf("--conflict-exit-code 9: exit %d", res.code)
	}

	start := time.Now()
	res = dlockProc(t, "run", "--wait", "300ms", "busy", "--", "true")
	if res.code != exitBusy {
		t.Fatalf("--wait 300ms on a busy lock: exit %d, want %d; stderr %q", res.code, exitBusy, res.stderr)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("--wait 300ms gave up after %v", waited)
	}
	line = oneLine(t, res.stderr) // stderr is a pipe: no status line
	if !strings.Contains(line, `"busy" is still busy after waiting`) || !strings.Contains(line, "retry after") {
		t.Errorf("wait-timeout message %q", line)
	}
}

func TestRunExitCodes(t *testing.T) {
	l := newLocker(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 125", 125},
		{"kill -9 $$", exitSignal + 9},
		{"kill -TERM $$", exitSignal + 15},
	} {
		res := dlockIn(t, []string{"run", "codes", "--", "sh", "-c", tc.script})
		if res.code != tc.want {
			t.Errorf("CMD %q: exit %d, want %d (stderr %q)", tc.script, res.code, tc.want, res.stderr)
		}
		if held(t, l, "codes") {
			t.Fatalf("after CMD %q the lock is still held", tc.script)
		}
	}

	res := dlockIn(t, []string{"run", "--ttl", "3s", "env", "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_FENCE ${#DLOCK_TOKEN}"`})
	f := strings.Fields(res.stdout)
	if res.code != 0 || len(f) != 3 || f[0] != "env" || f[1] == "0" || f[2] != "22" {
		t.Fatalf("CMD's environment: got %q (exit %d), want DLOCK_KEY=env, a fence and a 22-character token", res.stdout, res.code)
	}
	info, err := l.Inspect(context.Background(), "env")
	if err != nil || strconv.FormatUint(info.Fence, 10) != f[1] {
		t.Fatalf("DLOCK_FENCE=%s, but the key's fence is %d (%v)", f[1], info.Fence, err)
	}
}

func TestRunCommandNotRunnable(t *testing.T) {
	l := newLocker(t)
	res := dlockIn(t, []string{"run", "nocmd", "--", "/nonexistent/dlock-test-cmd"})
	if res.code != exitNotFound || !strings.Contains(oneLine(t, res.stderr), "command not found") {
		t.Fatalf("missing CMD: exit %d, stderr %q; want %d and 'command not found'", res.code, res.stderr, exitNotFound)
	}
	res = dlockIn(t, []string{"run", "nocmd", "--", "dlock-test-no-such-command"})
	if res.code != exitNotFound {
		t.Fatalf("CMD not on PATH: exit %d, want %d", res.code, exitNotFound)
	}
	script := filepath.Join(t.TempDir(), "noexec.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, []string{"run", "nocmd", "--", script})
	if res.code != exitCannotExec {
		t.Fatalf("CMD not executable: exit %d, want %d; stderr %q", res.code, exitCannotExec, res.stderr)
	}
	if held(t, l, "nocmd") {
		t.Fatal("the lock is held after CMD could not run")
	}
}

// startProc starts the dlock binary; its stdout is read line by line.
func startProc(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "DLOCK_REDIS_URL="+redisURL())
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op when it has exited
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out), stderr
}

// expectLine reads lines until one equals want, within a limit.
func expectLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	got := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if sc.Text() == want {
				got <- true
				return
			}
		}
		got <- false
	}()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("output ended without the line %q", want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no line %q within 20s", want)
	}
}

// waitExit waits for cmd to exit, within a limit, and returns its code.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("dlock still running after %v", limit)
		return -1
	}
}

const trapTERM = `trap 'echo "got TERM"; exit 42' TERM; echo ready; while :; do sleep 0.05; done`

func TestRunForwardsSIGTERM(t *testing.T) {
	l := newLocker(t)
	cmd, out, _ := startProc(t, "run", "fwd", "--", "sh", "-c", trapTERM)
	expectLine(t, out, "ready")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expectLine(t, out, "got TERM")
	if code := waitExit(t, cmd, 20*time.Second); code != 42 {
		t.Fatalf("exit %d, want CMD's 42", code)
	}
	if held(t, l, "fwd") {
		t.Fatal("the lock is held after CMD exited")
	}
}

func TestRunKill9FreesAfterTTL(t *testing.T) {
	l := newLocker(t)
	cmd, out, _ := startProc(t, "run", "--ttl", "2s", "k9", "--", "sh", "-c", `echo $$; exec sleep 60`)
	if !out.Scan() {
		t.Fatal("no pid from CMD")
	}
	child, err := strconv.Atoi(out.Text())
	if err != nil {
		t.Fatal(err)
	}
	if !held(t, l, "k9") {
		t.Fatal("the lock is not held while CMD runs")
	}
	killed := time.Now()
	cmd.Process.Kill()
	waitExit(t, cmd, 10*time.Second)
	// The lease was renewed at most ttl/3 ago: the key outlives dlock.
	if !held(t, l, "k9") && time.Since(killed) < time.Second {
		t.Fatal("the key vanished at once; it should live until its lease ends")
	}
	dlocktest.Eventually(t, 10*time.Second, "the key to expire", func() bool { return !held(t, l, "k9") })
	t.Logf("key freed %v after kill -9", time.Since(killed).Round(time.Millisecond))
	// CMD got SIGTERM when dlock died (Linux parent-death signal).
	dlocktest.Eventually(t, 10*time.Second, "CMD to die with dlock", func() bool { return gone(child) })
}

// gone reports whether process pid has exited (or is a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) || syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

func TestRunLostLock(t *testing.T) {
	for _, tc := range []struct {
		name, script, grace, wantMsg string
	}{
		{"CMD stops on SIGTERM", `trap 'exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`, "10s", "SIGTERM"},
		{"CMD ignores SIGTERM", `trap '' TERM; touch "$1"; while :; do sleep 0.05; done`, "300ms", "sending SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "lost-" + strconv.Itoa(len(tc.grace))
			l := newLocker(t)
			ready := filepath.Join(t.TempDir(), "ready")
			res := make(chan result, 1)
			go func() {
				res <- dlockIn(t, []string{"run", "--ttl", "1s", "--kill-grace", tc.grace, key, "--", "sh", "-c", tc.script, "sh", ready})
			}()
			dlocktest.Eventually(t, 20*time.Second, "CMD to start", func() bool { _, err := os.Stat(ready); return err == nil })
			// Someone deletes the key and another client takes the lock.
			if _, err := l.ForceUnlock(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			thief, err := l.TryLock(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer thief.Unlock(context.Background())
			select {
			case r := <-res:
				if r.code != exitLost {
					t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLost, r.stderr)
				}
				if !strings.Contains(r.stderr, `lost the lock on "`+key+`"`) || !strings.Contains(r.stderr, tc.wantMsg) {
					t.Fatalf("stderr %q: want the loss and %q", r.stderr, tc.wantMsg)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("dlock did not stop CMD after losing the lock")
			}
			if thief.Err() != nil {
				t.Fatalf("dlock's release took the new holder's lock: %v", thief.Err())
			}
		})
	}
}

// On a terminal dlock shows a status line while it waits; `script` gives
// it one.
func TestRunStatusLineOnTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("script(1) (util-linux) is needed to give dlock a terminal")
	}
	l := newLocker(t)
	lk, err := l.TryLock(context.Background(), "tty", dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inner := binPath + " run --wait 1500ms tty -- true"
	cmd := exec.CommandContext(ctx, "script", "-qfec", inner, "/dev/null")
	cmd.Env = append(os.Environ(), "DLOCK_REDIS_URL="+redisURL())
	out, _ := cmd.CombinedOutput()
	s := string(out)
	if !strings.Contains(s, `dlock: waiting for "tty" (holder's lease`) || !strings.Contains(s, "\r") {
		t.Fatalf("terminal output %q: want a status line while waiting", s)
	}
	if !strings.Contains(s, `"tty" is still busy after waiting`) {
		t.Fatalf("terminal output %q: want the busy message at the end", s)
	}
}

func TestRunOwnerAndFair(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t)
	lk, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-1"), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	res := dlockIn(t, []string{"run", "--owner", "deploy-1", "owned", "--", "sh", "-c", "exit 3"})
	if res.code != 3 {
		t.Fatalf("run --owner of the holding owner: exit %d, want CMD's 3; stderr %q", res.code, res.stderr)
	}
	info, err := l.Inspect(ctx, "owned")
	if err != nil || !info.Held || info.Holds != 1 {
		t.Fatalf("after the nested run the owner's first hold must remain: %+v, %v", info, err)
	}
	if res := dlockIn(t, []string{"run", "--owner", "deploy-2", "owned", "--", "true"}); res.code != exitBusy {
		t.Fatalf("run --owner of another owner: exit %d, want %d", res.code, exitBusy)
	}
	if res := dlockIn(t, []string{"run", "--fair", "fair", "--", "true"}); res.code != 0 {
		t.Fatalf("run --fair on a free key: exit %d, stderr %q", res.code, res.stderr)
	}
}

// SIGINT to a waiting dlock stops the wait, leaves the queue and exits
// 128+2, without running CMD.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t)
	lk, err := l.TryLock(ctx, "intr", dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	marker := filepath.Join(t.TempDir(), "ran")
	cmd, _, stderr := startProc(t, "run", "--wait", "forever", "intr", "--", "touch", marker)
	dlocktest.Eventually(t, 20*time.Second, "dlock to queue", func() bool {
		info, err := l.Inspect(ctx, "intr")
		return err == nil && info.Waiters == 1
	})
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd, 20*time.Second); code != exitSignal+2 {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitSignal+2, stderr.String())
	}
	if !strings.Contains(stderr.String(), `while waiting for "intr"`) {
		t.Errorf("stderr %q does not say what was interrupted", stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("CMD ran although dlock was interrupted before it had the lock")
	}
	info, err := l.Inspect(ctx, "intr")
	if err != nil || info.Waiters != 0 {
		t.Errorf("the interrupted waiter stayed in the queue: %+v, %v", info, err)
	}
}
