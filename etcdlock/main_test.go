package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// shared is the one-member cluster of the tests and examples that need no
// faults, started by TestMain.
var shared *etcdtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcdlock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = etcdtest.New(dir, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("ETCD_ENDPOINTS", strings.Join(shared.Endpoints(), ",")) // for the Examples, which read it as a program would
	code := m.Run()
	shared.Close()
	if code == 0 {
		if err := checkLeaks(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

// checkLeaks waits up to d for every goroutine running code of this module
// (package etcdlock and its harness) to end, and reports those still there.
func checkLeaks(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "dlock/etcdlock.") || strings.Contains(g, "dlock/etcdlock/etcdtest.") {
				if !strings.Contains(g, "etcdlock_test.checkLeaks") && !strings.Contains(g, "etcdlock_test.TestMain") {
					leaked = append(leaked, g)
				}
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdlock: %d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client returns a client of the shared cluster, closed when t ends.
func client(t testing.TB) *clientv3.Client { return shared.Client(t) }

// faultyClient returns a client of the shared cluster whose unary calls go
// through unary (which drops, fails or holds them back), closed when t
// ends, after the Lockers made over it.
func faultyClient(t testing.TB, unary grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	cfg := shared.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(unary))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newLocker returns a Locker over cli, closed when t ends.
func newLocker(t testing.TB, cli *clientv3.Client, opts ...dlock.Option) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(cli, opts...)
	if err != nil {
		t.Fatalf("etcdlock.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// The etcd driver keeps the contract that every dlock driver keeps. The
// README's table of what works where is checked against what ran.
func TestConformance(t *testing.T) {
	cli := client(t)
	var m dlocktest.Matrix
	t.Run("etcd", func(t *testing.T) {
		dlocktest.Run(t, dlocktest.Harness{
			New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
				l, err := etcdlock.New(cli, opts...)
				if err != nil {
					t.Fatalf("etcdlock.New: %v", err)
				}
				return l
			},
			Lose: func(t *testing.T, key string) {
				l, err := etcdlock.New(cli)
				if err != nil {
					t.Fatalf("etcdlock.New: %v", err)
				}
				defer l.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := cli.Delete(ctx, l.RangeOf(key), clientv3.WithPrefix()); err != nil {
					t.Fatalf("delete %q: %v", l.RangeOf(key), err)
				}
			},
			MinTTL:  time.Second,
			Caps:    dlocktest.All,
			Backend: "etcd",
			Matrix:  &m,
		})
	})
	m.Check(t, filepath.Join("..", "README.md"))
}
