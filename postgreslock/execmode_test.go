package postgreslock_test

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
)

// The driver runs its statements in the pool's query mode, as every
// other query on that pool: with pgx's default, a connection prepares
// them once and keeps them; with default_query_exec_mode=exec (what a pool
// behind PgBouncer in transaction mode before 1.21 sets), the session
// keeps no prepared statement.
func TestPoolQueryMode(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode     string
		prepared bool
	}{
		{"", true},
		{"exec", false},
		{"simple_protocol", false},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			url := shared.URL("") + "&pool_max_conns=1"
			if tc.mode != "" {
				url += "&default_query_exec_mode=" + tc.mode
			}
			p := pool(t, url)
			l := newLocker(t, p, dlock.WithNotify(false))
			key := "execmode:" + tc.mode + ":" + t.Name()
			for range 3 {
				lk, err := l.TryLock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The pool's one connection: the session that ran them.
			var n int
			if err := p.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql AND statement NOT LIKE '%pg_prepared_statements%'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (n > 0) != tc.prepared {
				t.Fatalf("%d statements prepared in the session; want some: %v", n, tc.prepared)
			}
		})
	}
}
