// Package pgtest starts real PostgreSQL servers for tests: initdb into a
// temporary directory, then the server on a free loopback port, with the
// faults a lock's tests need (kill -9, pause and resume, restart on the
// same data). It needs PostgreSQL's binaries (Debian's postgresql
// package); [Find] says where they are, or why they are missing.
//
// initdb and the server refuse to run as root: when the test runs as root,
// they run as the "postgres" user, which owns the data directory.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartTimeout bounds how long a server may take to accept connections.
const StartTimeout = 30 * time.Second

// Options are the settings of a server.
type Options struct {
	// Fsync keeps PostgreSQL's fsync on, as in production (benchmarks);
	// tests leave it off, which is faster and loses nothing unless the
	// machine itself crashes.
	Fsync bool
	// Settings are more "name=value" server settings (postgresql.conf).
	Settings []string
}

// Server is one PostgreSQL server that this process started. Its methods
// are safe for concurrent use.
type Server struct {
	bin, dir, data string
	port           int
	opts           Options
	cred           *syscall.Credential

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Find returns the directory of PostgreSQL's binaries: that of initdb on
// PATH, else the newest /usr/lib/postgresql/<version>/bin.
func Find() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: no initdb on PATH nor in /usr/lib/postgresql/*/bin: install PostgreSQL (Debian: apt-get install postgresql)")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start runs initdb in a new directory under the system's temporary
// directory (which the postgres user can reach) and starts a server on a
// free loopback port, waiting until it accepts connections. Close removes
// the directory.
func Start(opts Options) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	d, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: d, data: filepath.Join(d, "data"), opts: opts}
	if os.Geteuid() == 0 {
		if s.cred, err = postgresUser(); err != nil {
			return nil, err
		}
		if err := os.Chown(d, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// postgresUser is the credential of the "postgres" user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and there is no postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the connection string of database db ("postgres" when
// empty).
func (s *Server) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Pid returns the process id of the server's postmaster, 0 when it is not
// running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart starts the server on its data directory and port, unless it is
// running, and waits until it accepts connections.
func (s *Server) Restart() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return nil
	}
	args := []string{"-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=128MB",
		"-c", "fsync=" + onOff(s.opts.Fsync), "-c", "full_page_writes=" + onOff(s.opts.Fsync)}
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.mu.Unlock()
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(exited)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// waitReady waits until the server answers a query, or fails with its log.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL(""))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready within %v: %v\n%s", StartTimeout, err, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns the end of the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// signal sends sig to the server's postmaster and then to its children
// (each backend is a session of its own, so no process group holds them
// all), and returns the exit channel of the server, nil when it is not
// running.
func (s *Server) signal(sig syscall.Signal) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(pid, sig)
	for _, c := range children(pid) {
		syscall.Kill(c, sig)
	}
	return s.exited
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(c); ok && ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// procStat returns the parent and the state letter (R, S, T, Z, ...) of
// process pid, from /proc; ok is false when there is no such process.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// dead reports whether process pid is gone or a zombie: a zombie holds
// no memory, no files and no sockets, only its exit status, which
// whoever adopted it collects in its own time.
func dead(pid int) bool {
	_, st, ok := procStat(pid)
	return !ok || st == 'Z' || st == 'X'
}

// Stop shuts the server down (fast shutdown: sessions are ended, data
// kept) and waits for it.
func (s *Server) Stop() error { return s.end(syscall.SIGINT) }

// Kill kills the server and all its backends with SIGKILL, as a crash
// would, and waits for them; Restart recovers from the WAL.
func (s *Server) Kill() error { return s.end(syscall.SIGKILL) }

func (s *Server) end(sig syscall.Signal) error {
	s.signal(syscall.SIGCONT) // a paused server cannot shut down
	var kids []int
	if pid := s.Pid(); pid != 0 {
		kids = children(pid)
	}
	exited := s.signal(sig)
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
	case <-time.After(StartTimeout):
		s.signal(syscall.SIGKILL)
		<-exited
	}
	gone(kids)
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
	return nil
}

// gone waits until none of pids is left, but zombies: the backends of a
// killed postmaster exit a little after it.
func gone(pids []int) {
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for !dead(p) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Pause stops the server and its backends with SIGSTOP: connections stay
// open, and nothing is answered until Resume. It returns once every
// process of the server is stopped (five seconds at most): the
// postmaster first, which then starts no process, then each process it
// had started.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	syscall.Kill(pid, syscall.SIGSTOP)
	stopped(pid, deadline)
	kids := children(pid)
	for _, c := range kids {
		syscall.Kill(c, syscall.SIGSTOP)
	}
	for _, c := range kids {
		stopped(c, deadline)
	}
}

// stopped waits until process pid is stopped or dead, or deadline.
func stopped(pid int, deadline time.Time) {
	for time.Now().Before(deadline) {
		if _, st, ok := procStat(pid); !ok || st == 'T' || st == 't' || st == 'Z' || st == 'X' {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// CreateDB creates database name and returns its URL.
func (s *Server) CreateDB(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL(""))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil && !strings.Contains(err.Error(), "already exists") {
		return "", err
	}
	return s.URL(name), nil
}
