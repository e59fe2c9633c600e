package postgreslock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sqlTracer records the text of every statement a pool sends.
type sqlTracer struct {
	mu   sync.Mutex
	sent []string
}

func (s *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	s.sent = append(s.sent, d.SQL)
	s.mu.Unlock()
	return ctx
}

func (s *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements sent since the last call.
func (s *sqlTracer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := s.sent
	s.sent = nil
	return sent
}

// A TryLock of a name whose row the Locker has seen sends the
// acquisition without the insert of a new name's row: that part of the
// statement, which only a name's first acquisition uses, costs the
// server the memory of its own plan (about 170 KB, allocated and given
// back to the system at every execution). The first acquisition of a
// name sends it; so does a row deleted behind the Locker's back, whose
// next acquisition still succeeds (the acquire function makes the row).
func TestKnownNameSkipsInsert(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	var tr sqlTracer
	cfg.ConnConfig.Tracer = &tr
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := newLocker(t, p)
	ctx := context.Background()
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	inserts := func(what string) bool {
		t.Helper()
		n := 0
		for _, sql := range tr.take() {
			if strings.Contains(sql, "_acquire(") {
				n++
				if strings.Contains(sql, "INSERT INTO") {
					return true
				}
			}
		}
		if n != 1 {
			t.Fatalf("%s sent %d acquisitions; want 1", what, n)
		}
		return false
	}
	cycle := func(what string) {
		t.Helper()
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: unlock: %v", what, err)
		}
	}
	cycle("the first acquisition")
	if !inserts("the first acquisition") {
		t.Fatal("the first acquisition of a name sent no insert of its row")
	}
	for i := range 3 {
		cycle("a later acquisition")
		if inserts("a later acquisition") {
			t.Fatalf("acquisition %d of a name whose row is there sent the insert of a new name's row", i+2)
		}
	}
	if _, err := p.Exec(ctx, `DELETE FROM dlock WHERE name = $1`, l.NameOf(key)); err != nil {
		t.Fatal(err)
	}
	tr.take()
	cycle("the acquisition after the row was deleted")
	var fence int64
	if err := p.QueryRow(ctx, `SELECT fence FROM dlock WHERE name = $1`, l.NameOf(key)).Scan(&fence); err != nil {
		t.Fatalf("the row of the name after its acquisition: %v", err)
	}
}
