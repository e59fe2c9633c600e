package postgreslock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// countedPool returns a pool on url whose statements c counts, with at
// most conns connections, closed when t ends.
func countedPool(t *testing.T, url string, c *counter, conns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = c
	cfg.MaxConns = conns
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// An uncontended acquisition is one statement, a release another, and a
// busy TryLock one: as the lease-row floor, which upserts and deletes.
func TestStatementsPerCycle(t *testing.T) {
	var c counter
	ctx := context.Background()
	l := newLocker(t, countedPool(t, shared.URL(""), &c, 4))
	other := newLocker(t, pool(t, ""))
	for i := range 5 {
		n := c.n.Load()
		lk, err := l.TryLock(ctx, t.Name())
		if err != nil {
			t.Fatal(err)
		}
		if got := c.n.Load() - n; got != 1 {
			t.Fatalf("cycle %d: TryLock sent %d statements; want 1", i, got)
		}
		n = c.n.Load()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.n.Load() - n; got != 1 {
			t.Fatalf("cycle %d: Unlock sent %d statements; want 1", i, got)
		}
	}
	held, err := other.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	n := c.n.Load()
	if _, err := l.TryLock(ctx, t.Name()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held key: %v; want ErrNotAcquired", err)
	}
	if got := c.n.Load() - n; got != 1 {
		t.Fatalf("a busy TryLock sent %d statements; want 1", got)
	}
}

// walWrites returns how many times the server has written its WAL out
// (pg_stat_wal.wal_write), after making p's one backend report its
// statistics.
func walWrites(t *testing.T, p *pgxpool.Pool) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := p.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := p.QueryRow(ctx, `SELECT wal_write FROM pg_stat_wal`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An uncontended cycle waits for one WAL flush, the acquisition's: the
// release commits without waiting for its WAL (a release lost in a crash
// only leaves the lease to run out), so a cycle costs fewer flushes than
// the lease-row floor's two.
func TestWALFlushesPerCycle(t *testing.T) {
	s, err := pgtest.Start(pgtest.Options{Settings: []string{"wal_writer_delay=10s", "autovacuum=off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // after the Locker's and the pool's clean-ups
	if err := createTables(s); err != nil {
		t.Fatal(err)
	}
	var c counter
	p := countedPool(t, s.URL(""), &c, 1) // one backend: its statistics are all of them
	l := newLocker(t, p)
	ctx := context.Background()
	const cycles = 100
	before := walWrites(t, p)
	for range cycles {
		lk, err := l.TryLock(ctx, t.Name())
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(walWrites(t, p)-before) / cycles
	if per > 1.2 {
		t.Fatalf("%.2f WAL writes per uncontended cycle; want 1 (the acquisition's)", per)
	}
	t.Logf("%.2f WAL writes per uncontended cycle", per)
}
