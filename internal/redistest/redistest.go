// Package redistest starts real redis-server processes for tests: on free
// loopback ports, without persistence, each in a temporary directory of its
// own, and stops them when the test ends (or, on Linux, when the test binary
// dies). It injects the faults that the lock tests need: SIGSTOP/SIGCONT,
// kill -9, restart on the same port, SCRIPT FLUSH and DEBUG SLEEP.
//
// It never mocks Redis and never touches a process it did not start.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// TB is the part of testing.TB that the harness uses. It is declared here so
// that a program (the CLI's demo) can start a server without linking the
// testing package.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Binary is the name of the server executable looked up on PATH.
const Binary = "redis-server"

// readyTimeout bounds how long a starting server may take to answer PING.
const readyTimeout = 15 * time.Second

// Config describes a server to start.
type Config struct {
	// Cluster starts the server with cluster-enabled yes (a node with no
	// slots: CLUSTER KEYSLOT works, keyed commands do not).
	Cluster bool
	// Extra lines appended to the configuration.
	Extra []string
	// Password, when set, is required of clients (requirepass); the
	// server's Options carry it.
	Password string
	// Sentinel starts a Sentinel instead of a data server. A Sentinel
	// rewrites its configuration, so it is read from a file in the
	// server's directory rather than from standard input.
	Sentinel bool
}

// Server is one running redis-server.
type Server struct {
	cfg  Config
	dir  string
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
	closed  bool
}

// Start starts a server and stops it when t ends. It fails t when no
// redis-server binary is installed: `make test` installs one.
func Start(t TB) *Server {
	t.Helper()
	return StartConfig(t, Config{})
}

// started returns v, closed when t ends, or fails t with err.
func started[T interface{ Close() }](t TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// StartConfig is Start with a Config.
func StartConfig(t TB, cfg Config) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := New(dir, cfg)
	return started(t, s, err)
}

// New starts a server whose files live in dir, which it makes if need be.
// The caller must call Close. It is for TestMain and programs; tests use
// Start.
func New(dir string, cfg Config) (*Server, error) {
	if _, err := exec.LookPath(Binary); err != nil {
		return nil, fmt.Errorf("%s not found on PATH (run `make test`, which installs it): %w", Binary, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, dir: dir}
	var err error
	for range 5 { // a free port can be taken between our probe and Redis's bind
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Options returns client options for this server with short timeouts that
// suit tests.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), Password: s.cfg.Password, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}

// Client returns a new client of the server, closed when t ends.
func (s *Server) Client(t TB) *redis.Client {
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *Server) config() string {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(s.port),
		"daemonize no",
		"dir " + s.dir,
		"logfile " + filepath.Join(s.dir, "redis.log"),
	}
	if !s.cfg.Sentinel {
		lines = append(lines, `save ""`, "appendonly no", "enable-debug-command local")
	}
	if s.cfg.Password != "" {
		lines = append(lines, "requirepass "+s.cfg.Password)
	}
	if s.cfg.Cluster {
		lines = append(lines, "cluster-enabled yes", "cluster-config-file "+filepath.Join(s.dir, "nodes.conf"))
	}
	return strings.Join(append(lines, s.cfg.Extra...), "\n") + "\n"
}

func (s *Server) start() error {
	cmd := exec.Command(Binary, "-")
	cmd.Stdin = strings.NewReader(s.config())
	if s.cfg.Sentinel {
		// Written anew at each start: a restart may change the port.
		path := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(s.config()), 0o600); err != nil {
			return err
		}
		cmd = exec.Command(Binary, path, "--sentinel")
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", Binary, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		s.kill()
		return err
	}
	return nil
}

func (s *Server) waitReady(exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.cfg.Password, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d not ready after %v: %v", s.port, readyTimeout, err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval of a readiness probe, bounded by deadline
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}

// signal sends sig to the running server and records whether sig stops
// it (SIGSTOP) or lets it run (SIGCONT).
func (s *Server) signal(sig syscall.Signal, stopped bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.closed {
		return errors.New("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.stopped = stopped
	return nil
}

// Pause stops the server with SIGSTOP: it keeps its connections but answers
// nothing until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

// running reports whether the server's process was started and has been
// neither killed nor closed.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !s.closed
}

// Kill ends the server with SIGKILL and waits for it to exit. Its data is
// gone: nothing is persisted.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() { s.stop(false) }

// stop kills the server's process, paused or not, and waits for it to
// exit; closing marks the server closed in the same step. A closed server
// is not stopped again.
func (s *Server) stop(closing bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = closing
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Process.Signal(syscall.SIGCONT)
	<-exited
}

// Restart kills the server and starts it again, empty, on the same port.
func (s *Server) Restart() error {
	s.kill()
	var err error
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) { // the old socket may linger a moment
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// ScriptFlush empties the server's script cache, so that the next EVALSHA
// gets NOSCRIPT.
func (s *Server) ScriptFlush(ctx context.Context) error {
	c := redis.NewClient(s.Options())
	defer c.Close()
	return c.ScriptFlush(ctx).Err()
}

// DebugSleep makes the server sleep d inside one command, blocking every
// client. It returns when the server is awake again.
func (s *Server) DebugSleep(ctx context.Context, d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: d + 5*time.Second})
	defer c.Close()
	return c.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err()
}

// Close stops the server (resuming it first if paused) and waits for it.
func (s *Server) Close() { s.stop(true) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Main is the body of a TestMain whose package shares one server: it starts
// the server, tells the package's Examples where it is in REDIS_ADDR (as a
// user's program would learn it), calls use with it, runs the tests, stops
// the server and returns the exit code. m is the *testing.M.
func Main(m interface{ Run() int }, use func(*Server)) int {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := New(dir, Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		return 1
	}
	defer s.Close()
	os.Setenv("REDIS_ADDR", s.Addr())
	if use != nil {
		use(s)
	}
	return m.Run()
}
