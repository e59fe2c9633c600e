package postgreslock_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// harness is the conformance harness of Lockers over p.
func harness(p *pgxpool.Pool) dlocktest.Harness {
	return dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := postgreslock.New(p, opts...)
			if err != nil {
				t.Fatalf("postgreslock.New: %v", err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := p.Exec(ctx, "WITH r AS (UPDATE dlock SET token = '' WHERE name = $1) DELETE FROM dlock_holds WHERE name = $1", "dlock:lock:"+key); err != nil {
				t.Fatal(err)
			}
		},
		Caps: dlocktest.All,
	}
}

// The PostgreSQL driver keeps the contract that every dlock driver keeps.
// The README's table of what works where is checked against what ran.
func TestConformance(t *testing.T) {
	var m dlocktest.Matrix
	p := pool(t, "")
	t.Run("postgres", func(t *testing.T) {
		h := harness(p)
		h.Backend, h.Matrix = "PostgreSQL", &m
		dlocktest.Run(t, h)
	})
	m.Check(t, filepath.Join("..", "README.md"))
}

// Package election keeps its rules over the PostgreSQL driver.
func TestElection(t *testing.T) {
	dlocktest.RunElection(t, harness(pool(t, "")))
}
