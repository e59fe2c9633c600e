package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/postgreslock/pgtest"
)

// pgNode is the PostgreSQL server of a postgres run, which this process
// started (package pgtest: initdb into a temporary directory, the server
// on a free loopback port). Its faults reach the postmaster and every
// process it started, found as its children, and no other process.
type pgNode struct{ s *pgtest.Server }

// startPostgres starts a server and creates postgreslock's tables in its
// database "postgres".
func startPostgres() (*pgNode, error) {
	s, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.CreateTables(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("faults: postgres tables: %w", err)
	}
	return &pgNode{s}, nil
}

func (n *pgNode) name() string { return fmt.Sprintf("postgres (pid %d)", n.s.Pid()) }

// Addr is the server's host:port.
func (n *pgNode) Addr() string { return n.s.Addr() }

// Pause stops the postmaster and its processes with SIGSTOP.
func (n *pgNode) Pause() error { n.s.Pause(); return nil }

// Resume lets them go on with SIGCONT.
func (n *pgNode) Resume() error { n.s.Resume(); return nil }

// Kill kills them with SIGKILL, as a crash would, and waits for them.
func (n *pgNode) Kill() { n.s.Kill() }

// Restart starts the server again on its data directory and port, after
// Kill: it recovers from its log.
func (n *pgNode) Restart() error { return n.s.Restart() }

// Close stops the server and removes its directory.
func (n *pgNode) Close() { n.s.Close() }

// pgURL is the connection string of the run's database at addr (the
// server, or a worker's proxy in front of it).
func pgURL(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}
