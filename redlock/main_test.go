package redlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// shared are the five servers of the tests that need no fault of their
// own, and of the Examples; TestMain starts them.
var shared []*redistest.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	redis.SetLogger(quiet{}) // the fault tests make the client log every failed dial
	dir, err := os.MkdirTemp("", "redlock-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var addrs []string
	for i := range 5 {
		d := fmt.Sprintf("%s/n%d", dir, i)
		if err := os.Mkdir(d, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s, err := redistest.New(d, redistest.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer s.Close()
		shared = append(shared, s)
		addrs = append(addrs, s.Addr())
	}
	os.Setenv("REDLOCK_ADDRS", strings.Join(addrs, ","))
	return m.Run()
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// clients returns a client of each server, closed when t ends, with
// deadlines of contexts bounding every command.
func clients(t testing.TB, servers []*redistest.Server) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		o := s.Options()
		o.ContextTimeoutEnabled = true
		o.MaxRetries = -1
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// testTimeout is the per-node timeout of the tests: generous, for a
// machine loaded by -race and parallel tests.
const testTimeout = 500 * time.Millisecond

// newLocker returns a Locker over servers, closed when t ends.
func newLocker(t testing.TB, servers []*redistest.Server, opts ...dlock.Option) *Locker {
	t.Helper()
	l, err := NewConfig(Config{Clients: clients(t, servers), NodeTimeout: testTimeout}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// start starts n servers of t's own, for tests that inject faults.
func start(t testing.TB, n int) []*redistest.Server {
	t.Helper()
	s := make([]*redistest.Server, n)
	for i := range s {
		s[i] = redistest.Start(t)
	}
	return s
}

// keyFor returns a key unique to the test and to this run of it.
func keyFor(t testing.TB) string {
	return strings.ReplaceAll(t.Name(), "/", ":") + ":" + driver.NewToken()[:8]
}

// lose deletes key's lock on every server, as if it expired everywhere.
func lose(t testing.TB, servers []*redistest.Server, key string) {
	t.Helper()
	for _, c := range clients(t, servers) {
		if err := c.Del(context.Background(), "dlock:lock:"+key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
