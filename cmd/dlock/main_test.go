package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/internal/syncbuf"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// The end-to-end tests share one redis-server, one embedded etcd server
// and one dlock binary, built by TestMain; each test uses keys (or a
// prefix) of its own.
var (
	binPath string
	srv     *redistest.Server
	etcdSrv *etcdtest.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	redis.SetLogger(quietLogger{}) // as main does
	dir, err := os.MkdirTemp("", "dlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "dlock")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	srv, err = redistest.New(dir, redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	etcdSrv, err = etcdtest.New(filepath.Join(dir, "etcd"), 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer etcdSrv.Close()
	defer func() {
		if pgSrv != nil {
			pgSrv.Close()
		}
	}()
	return m.Run()
}

func redisURL() string { return "redis://" + srv.Addr() }

// result is what a dlock run left behind.
type result struct {
	stdout, stderr string
	code           int
}

// dlockProc runs the dlock binary with args, bounded by a minute.
func dlockProc(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), "DLOCK_REDIS_URL="+redisURL())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dlock %q did not finish within a minute; stderr: %s", args, errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("dlock %q: %v", args, err)
	}
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// dlockIn runs dlock in this process, so that the race detector watches
// it. vars are extra environment variables ("NAME=value").
func dlockIn(t *testing.T, args []string, vars ...string) result {
	t.Helper()
	return dlockInEnv(t, args, nil, vars...)
}

// dlockInEnv is dlockIn with the env changed by tweak first, when not nil.
func dlockInEnv(t *testing.T, args []string, tweak func(*env), vars ...string) result {
	t.Helper()
	var out, errb syncbuf.Buffer
	e := &env{
		stdout: &out,
		stderr: &errb,
		getenv: func(name string) string {
			for _, v := range vars {
				if n, val, _ := strings.Cut(v, "="); n == name {
					return val
				}
			}
			if name == "DLOCK_REDIS_URL" {
				return redisURL()
			}
			return ""
		},
		signals: make(chan os.Signal),
	}
	if tweak != nil {
		tweak(e)
	}
	code := make(chan int, 1)
	go func() { code <- dlockMain(e, args) }()
	select {
	case c := <-code:
		return result{out.String(), errb.String(), c}
	case <-time.After(time.Minute):
		t.Fatalf("dlock %q did not finish within a minute; stderr: %s", args, errb.String())
		return result{}
	}
}

// newLocker returns a Locker on the shared server, closed when t ends.
func newLocker(t *testing.T, opts ...dlock.Option) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(srv.Client(t), append([]dlock.Option{dlock.WithFencing(true)}, opts...)...) // as dlock run
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func held(t *testing.T, l *redislock.Locker, key string) bool {
	t.Helper()
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func oneLine(t *testing.T, s string) string {
	t.Helper()
	s = strings.TrimSuffix(s, "\n")
	if s == "" || strings.Contains(s, "\n") {
		t.Fatalf("want exactly one line on stderr, got %q", s)
	}
	return s
}
