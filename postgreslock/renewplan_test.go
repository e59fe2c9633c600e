package postgreslock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// renewals is a pgx tracer that counts the renewal statements answered.
type renewals struct{ n atomic.Int64 }

type renewalKey struct{}

func (r *renewals) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, renewalKey{}, strings.Contains(d.SQL, "unnest("))
}

func (r *renewals) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if is, _ := ctx.Value(renewalKey{}).(bool); is && d.Err == nil {
		r.n.Add(1)
	}
}

// The batched renewal is planned for its batch every tick. A prepared
// statement's generic plan guesses 10 rows for the unnest of its arrays;
// with statistics taken while nothing was held (the holds table analyzed
// empty, but with pages), that plan scanned the holds and, for each,
// the whole batch again: 1,000 held locks cost a server about 140 ms a
// tick.
func TestRenewalPlannedForItsBatch(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(shared.URL("") + "&pool_max_conns=1") // one session: its statements are the renewals'
	if err != nil {
		t.Fatal(err)
	}
	var seen renewals
	cfg.ConnConfig.Tracer = &seen
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A renewal every 500ms: under the load of a whole test run a shorter
	// lease was lost once before its renewal came back, and the renewals
	// stopped with it.
	l, err := postgreslock.New(p, postgreslock.WithTable("renew_plan"), dlock.WithTTL(1500*time.Millisecond), dlock.WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 300
	key := func(i int) string { return t.Name() + ":" + strconv.Itoa(i) }
	// Pages of rows taken and released, then statistics saying "empty".
	for i := range n {
		lk, err := l.TryLock(ctx, key(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Exec(ctx, "ANALYZE renew_plan, renew_plan_holds"); err != nil {
		t.Fatal(err)
	}
	locks := make([]dlock.Lock, n)
	for i := range locks {
		if locks[i], err = l.TryLock(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	from := seen.n.Load()
	// Past the plan cache's 5 custom plans, when it weighs a generic one.
	dlocktest.Eventually(t, 60*time.Second, "8 renewals", func() bool {
		for i, lk := range locks {
			if lk.Err() != nil {
				t.Fatalf("lock %d lost before 8 renewals: %v", i, lk.Err())
			}
		}
		return seen.n.Load()-from >= 8
	})
	var generic int64
	if err := p.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements WHERE statement LIKE '%unnest(%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&generic); err != nil {
		t.Fatal(err)
	}
	if generic > 0 {
		t.Fatalf("the renewal ran %d times on a generic plan; want a plan for its batch each time", generic)
	}
	for i, lk := range locks {
		if lk.Err() != nil {
			t.Fatalf("lock %d lost: %v", i, lk.Err())
		}
		lk.Unlock(ctx)
	}
}

// A renewal changes no indexed column and both tables leave room on
// their pages (fillfactor), so renewals are HOT updates: no index entry
// and less WAL per hold and tick. Locks' holds are renewed in their
// names' rows, permits' in the holds table.
func TestRenewalsAreHOT(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	l, err := postgreslock.New(p, postgreslock.WithTable("renew_hot"), dlock.WithTTL(600*time.Millisecond), dlock.WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Tables made before the fillfactor (and, the names' one, before it
	// kept holds) get it from CreateTable.
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS renew_hot (name text PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, lim integer NOT NULL DEFAULT 0)`,
		`ALTER TABLE renew_hot RESET (fillfactor)`,
		`CREATE TABLE IF NOT EXISTS renew_hot_holds (name text NOT NULL, token text NOT NULL, kind "char" NOT NULL,
owner text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (name, token))`,
		`ALTER TABLE renew_hot_holds RESET (fillfactor)`,
	} {
		if _, err := p.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	stats := func(table string) (upd, hot int64) {
		if err := p.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		return upd, hot
	}
	tables := []string{"renew_hot", "renew_hot_holds"}
	var upd0, hot0 [2]int64
	for i, tb := range tables {
		upd0[i], hot0[i] = stats(tb)
	}
	const n = 250
	locks := make([]dlock.Lock, 0, 2*n)
	for i := range n {
		key := t.Name() + ":" + strconv.Itoa(i)
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		pm, err := l.TryAcquire(ctx, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, lk, pm)
	}
	// The server reports a session's counts within seconds.
	for i, tb := range tables {
		var upd, hot int64
		dlocktest.Eventually(t, 45*time.Second, "5 renewals of every hold in "+tb+" counted", func() bool {
			upd, hot = stats(tb)
			return upd-upd0[i] >= 5*n
		})
		if upd, hot = upd-upd0[i], hot-hot0[i]; hot < upd*9/10 {
			t.Fatalf("%s: %d of %d renewals were HOT updates; want at least 90%%", tb, hot, upd)
		}
		t.Logf("%s: %d of %d renewals were HOT updates", tb, hot, upd)
	}
	for _, lk := range locks {
		lk.Unlock(ctx)
	}
}
