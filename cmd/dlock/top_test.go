package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/syncbuf"
)

// topStores are the stores dlock top reads: the flags that name one,
// and a Locker on it.
func topStores(t *testing.T) map[string]struct {
	flags  []string
	locker func(t *testing.T, prefix string) dlock.Locker
} {
	return map[string]struct {
		flags  []string
		locker func(t *testing.T, prefix string) dlock.Locker
	}{
		"redis": {[]string{"--redis", redisURL()}, func(t *testing.T, prefix string) dlock.Locker {
			return newLocker(t, dlock.WithPrefix(prefix))
		}},
		"etcd": {[]string{"--etcd", etcdEndpoints()}, func(t *testing.T, prefix string) dlock.Locker {
			return newEtcdLocker(t, dlock.WithPrefix(prefix))
		}},
		"postgres": {[]string{"--postgres", pgURL(t)}, func(t *testing.T, prefix string) dlock.Locker {
			return newPgLocker(t, dlock.WithPrefix(prefix))
		}},
	}
}

// holdTwo takes two locks under a fresh prefix: a plain one, and an
// owner's. It returns the prefix.
func holdTwo(t *testing.T, locker func(*testing.T, string) dlock.Locker) string {
	t.Helper()
	prefix := "top" + driver.NewToken()[:6]
	l := locker(t, prefix)
	ctx := context.Background()
	if _, err := l.TryLock(ctx, "cron:nightly-report", dlock.WithTTL(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "deploy:web", dlock.WithOwner("release-7"), dlock.WithTTL(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// dlock top --once prints one table of the held locks in 80 columns.
func TestTopOnce(t *testing.T) {
	for name, store := range topStores(t) {
		t.Run(name, func(t *testing.T) {
			prefix := holdTwo(t, store.locker)
			res := dlockProc(t, append([]string{"top", "--once", "--prefix", prefix}, store.flags...)...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
			if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "KEY KIND STATE OWNER HOLDS TTL FENCE WAITERS" ||
				!strings.HasPrefix(lines[1], "cron:nightly-report ") || !strings.HasPrefix(lines[2], "deploy:web ") ||
				!strings.Contains(lines[2], " release-7 ") {
				t.Fatalf("top --once:\n%s", res.stdout)
			}
			for _, l := range lines {
				if n := len([]rune(l)); n > 80 {
					t.Errorf("a line of %d columns: %q", n, l)
				}
			}
		})
	}
	res := dlockProc(t, "top", "--sort", "size")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--sort size") {
		t.Errorf("top --sort size: exit %d, stderr %q; want a usage error", res.code, res.stderr)
	}
	res = dlockProc(t, "top") // stdout is a pipe here
	if res.code != exitUsage || !strings.Contains(res.stderr, "--once") {
		t.Errorf("top without a terminal: exit %d, stderr %q; want a usage error naming --once", res.code, res.stderr)
	}
}

// dlock top on a terminal (a pseudo-terminal of 100 columns: with AGE and
// a Redis fence of 16 digits, 80 leave too little for a long key) shows
// the held locks, follows a key press, and quits on q and on Ctrl-C.
func TestTopTerminal(t *testing.T) {
	for name, store := range topStores(t) {
		for _, quit := range []struct{ name, key string }{{"q", "q"}, {"ctrl-c", "\x03"}} {
			t.Run(name+"/"+quit.name, func(t *testing.T) {
				prefix := holdTwo(t, store.locker)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, binPath, append([]string{"top", "--prefix", prefix, "--interval", "200ms"}, store.flags...)...)
				cmd.Env = append(os.Environ(), "TERM=xterm-256color")
				term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
				if err != nil {
					t.Fatal(err)
				}
				defer term.Close()
				var screen syncbuf.Buffer
				go func() {
					buf := make([]byte, 4096)
					for {
						n, err := term.Read(buf)
						screen.Write(buf[:n])
						if err != nil {
							return
						}
					}
				}()
				waitScreen(t, &screen, 0, "the held locks", "cron:nightly-report", "deploy:web", "release-7", "AGE", ">=", "sort: age")
				// The screen is redrawn cell by cell: after w, the cells of
				// the title that change.
				from := len(screen.String())
				if _, err := term.Write([]byte("w")); err != nil {
					t.Fatal(err)
				}
				waitScreen(t, &screen, from, "the order by waiters", "waiters")
				if _, err := term.Write([]byte(quit.key)); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					var ee *exec.ExitError
					if errors.As(err, &ee) || err != nil {
						t.Fatalf("dlock top after %s: %v; screen:\n%s", quit.name, err, screen.String())
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("dlock top still running 10s after %s", quit.name)
				}
			})
		}
	}
}

// waitScreen waits until what the terminal was sent, from byte from on,
// holds every one of want.
func waitScreen(t *testing.T, screen *syncbuf.Buffer, from int, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := screen.String()[from:]
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q not on the screen after 15s; it shows:\n%q", what, missing, s)
		}
		time.Sleep(20 * time.Millisecond) // polling the screen for a condition, bounded above
	}
}

// The rows of a refresh, in each order; the age counts from the refresh
// that first saw a hold, marked >= for the holds of the first refresh.
func TestTopModel(t *testing.T) {
	m := newTopModel("Redis", "dlock", "*", "age", time.Second, nil)
	t0 := time.Now()
	old := dlock.Info{Key: "b-old", Held: true, Holds: 1, TTL: 9 * time.Second, Fence: 1, FenceKnown: true, WaitersKnown: true}
	m.sample([]dlock.Info{old}, t0)
	busy := dlock.Info{Key: "c-busy", Kind: dlock.KindSemaphore, Held: true, Holds: 2, Limit: 2, TTL: 5 * time.Second, Fence: 2, FenceKnown: true, Waiters: 3, WaitersKnown: true}
	first := dlock.Info{Key: "a-new", Held: true, Owner: "o", Holds: 2, TTL: 30 * time.Second, Fence: 3, FenceKnown: true, WaitersKnown: true}
	m.sample([]dlock.Info{old, busy, first, {Key: "free"}}, t0.Add(2*time.Second))
	order := func() string {
		var keys []string
		for _, r := range m.sorted() {
			keys = append(keys, r.Key)
		}
		return strings.Join(keys, " ")
	}
	for _, tc := range []struct{ sort, want string }{
		{"age", "b-old a-new c-busy"},
		{"waiters", "c-busy a-new b-old"},
		{"key", "a-new b-old c-busy"},
	} {
		m.sortBy = tc.sort
		if got := order(); got != tc.want {
			t.Errorf("sorted by %s: %s, want %s", tc.sort, got, tc.want)
		}
	}
	m.sortBy = "age"
	rows := map[string]string{}
	for _, l := range strings.Split(ansi.Strip(m.table(true)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	for _, want := range []string{"KEY KIND STATE OWNER HOLDS TTL FENCE WAITERS AGE", "b-old lock held - 1 9.0s 1 0 >=2.0s",
		"a-new lock held o 2 30s 3 0 0ms", "c-busy semaphore full - 2/2 5.0s 2 3 0ms"} {
		if rows[strings.Fields(want)[0]] != want {
			t.Errorf("row %q, want %q", rows[strings.Fields(want)[0]], want)
		}
	}
	// a hold that ended and came back is new
	m.sample([]dlock.Info{busy}, t0.Add(3*time.Second))
	m.sample([]dlock.Info{busy, old}, t0.Add(4*time.Second))
	if m.before[holdID(old)] || !m.seen[holdID(old)].Equal(t0.Add(4*time.Second)) {
		t.Errorf("a hold seen again after it ended keeps its first age")
	}
	long := dlock.Info{Key: strings.Repeat("k", 200), Held: true, Fence: 1234567890123456789, FenceKnown: true, WaitersKnown: true}
	m.sample([]dlock.Info{long}, t0.Add(5*time.Second))
	for _, l := range strings.Split(strings.TrimSuffix(m.table(false), "\n"), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}
