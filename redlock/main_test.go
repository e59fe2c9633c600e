package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
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
	l, err := New(clients(t, servers), append([]dlock.Option{WithNodeTimeout(testTimeout)}, opts...)...)
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

// nodeHook is a go-redis hook on the clients of the nodes that counts
// the round trips (a pipeline is one) and the calls of each script, and
// holds the next call of a script, or its reply, at a gate (see hold).
type nodeHook struct {
	trips   atomic.Int64
	dials   atomic.Int64 // connections opened
	mu      sync.Mutex
	scripts map[string]int64
	gates   map[*redisnode.Script]gate
}

// gate holds a call until open is closed or its context ends: before it
// is sent, or after it ran, its reply unread (reply).
type gate struct {
	open  chan struct{}
	reply bool
}

func (h *nodeHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		g := h.pass(cmd)
		if !g.reply {
			if err := g.wait(ctx); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err := next(ctx, cmd)
		if g.reply {
			if werr := g.wait(ctx); werr != nil {
				cmd.SetErr(werr)
				return werr
			}
		}
		return err
	}
}

func (h *nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		for _, cmd := range cmds {
			if err := h.pass(cmd).wait(ctx); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmds)
	}
}

var scriptNames = map[*redisnode.Script]string{
	acquireScript: "acquire", releaseScript: "release", raiseScript: "raise", renewScript: "renew",
}

// pass counts cmd, and takes away and returns its script's gate, if one
// is set.
func (h *nodeHook) pass(cmd redis.Cmder) (g gate) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, name := range scriptNames {
		if s.Runs(cmd) {
			if h.scripts == nil {
				h.scripts = map[string]int64{}
			}
			h.scripts[name]++
			g = h.gates[s]
			delete(h.gates, s)
		}
	}
	return g
}

// wait waits until the gate opens or ctx ends; a zero gate is open.
func (g gate) wait(ctx context.Context) error {
	if g.open == nil {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// calls returns how many calls of the script named name were sent.
func (h *nodeHook) calls(name string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scripts[name]
}

// hold makes the next call of s wait until open is called, or its
// context ends, before it is sent.
func (h *nodeHook) hold(s *redisnode.Script) (open func()) { return h.set(s, false) }

// holdReply lets the next call of s run, and holds its reply until open is
// called, or its context ends (the call then fails with no reply).
func (h *nodeHook) holdReply(s *redisnode.Script) (open func()) { return h.set(s, true) }

func (h *nodeHook) set(s *redisnode.Script, reply bool) (open func()) {
	g := gate{open: make(chan struct{}), reply: reply}
	h.mu.Lock()
	if h.gates == nil {
		h.gates = map[*redisnode.Script]gate{}
	}
	h.gates[s] = g
	h.mu.Unlock()
	return func() { close(g.open) }
}
