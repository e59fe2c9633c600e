package postgreslock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
)

// A lock's hold is kept in its name's row: taking it writes no row of
// the holds table, and releasing it empties the row and keeps its fence.
func TestLockHoldInNameRow(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	l := newLocker(t, p)
	name := l.NameOf(t.Name())
	row := func() (token string, holdFence, fence, holds int64) {
		t.Helper()
		err := p.QueryRow(ctx, `SELECT d.token, d.hold_fence, d.fence, (SELECT count(*) FROM dlock_holds h WHERE h.name = d.name)
FROM dlock d WHERE d.name = $1`, name).Scan(&token, &holdFence, &fence, &holds)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	for i := range 3 { // the name's first acquisition makes its row, the others update it
		lk, err := l.TryLock(ctx, t.Name())
		if err != nil {
			t.Fatal(err)
		}
		token, holdFence, fence, holds := row()
		if token != lk.Token() || uint64(holdFence) != lk.Fence() || uint64(fence) != lk.Fence() || holds != 0 {
			t.Fatalf("acquisition %d: the row has token %q, hold fence %d, fence %d, and %d holds in the holds table; want %q, %d, %d, 0",
				i, token, holdFence, fence, holds, lk.Token(), lk.Fence(), lk.Fence())
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if token, _, fence, holds = row(); token != "" || uint64(fence) != lk.Fence() || holds != 0 {
			t.Fatalf("after release %d: token %q, fence %d, %d holds; want \"\", %d, 0", i, token, fence, holds, lk.Fence())
		}
	}
}

// An owner's second hold of a lock goes to the holds table beside the
// one in the name's row. When the row's hold is released first, the lock
// stays the owner's until its other hold is released too: another owner
// finds it busy, and then takes it with a greater fence.
func TestOwnerHoldOutlivesRowHold(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, pool(t, ""))
	first, err := l.TryLock(ctx, t.Name(), dlock.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.TryLock(ctx, t.Name(), dlock.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("the second hold's fence %d is not above the first's %d", second.Fence(), first.Fence())
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	other := newLocker(t, pool(t, ""))
	if lk, err := other.TryLock(ctx, t.Name(), dlock.WithOwner("b")); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			lk.Unlock(ctx)
		}
		t.Fatalf("another owner's TryLock while the owner's second hold lives: %v; want %v", err, dlock.ErrNotAcquired)
	}
	if info, err := l.Inspect(ctx, t.Name()); err != nil || !info.Held || info.Owner != "a" {
		t.Fatalf("Inspect: %+v, %v; want held by a", info, err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk, err := other.TryLock(ctx, t.Name(), dlock.WithOwner("b"))
	if err != nil {
		t.Fatalf("another owner's TryLock once both holds are released: %v", err)
	}
	defer lk.Unlock(ctx)
	if lk.Fence() <= second.Fence() {
		t.Fatalf("the next holder's fence %d is not above %d", lk.Fence(), second.Fence())
	}
}

// A table made by an earlier version of the driver, which kept every
// hold in the holds table, is upgraded by CreateTable: a lock's hold
// that an earlier driver wrote there still keeps others out, is renewed
// and released by its token, and fences go on from the table's.
func TestUpgradedTableKeepsEarlierHolds(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	const table = "upgrade_rows"
	for _, ddl := range []string{
		`DROP TABLE IF EXISTS upgrade_rows, upgrade_rows_holds, upgrade_rows_waiters`,
		`CREATE TABLE upgrade_rows (name text PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, lim integer NOT NULL DEFAULT 0)`,
		`CREATE TABLE upgrade_rows_holds (name text NOT NULL, token text NOT NULL, kind "char" NOT NULL,
owner text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (name, token))`,
	} {
		if _, err := p.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	l, err := postgreslock.New(p, postgreslock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	name := l.NameOf(t.Name())
	// The earlier driver's hold, taken with fence 7.
	if _, err := p.Exec(ctx, `INSERT INTO upgrade_rows (name, fence) VALUES ($1, 7)`, name); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `INSERT INTO upgrade_rows_holds (name, token, kind, fence, expires_at) VALUES ($1, 'earlier', 'l', 7, now() + interval '1 minute')`, name); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if lk, err := l.TryLock(ctx, t.Name()); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			lk.Unlock(ctx)
		}
		t.Fatalf("TryLock while the earlier hold lives: %v; want %v", err, dlock.ErrNotAcquired)
	}
	tag, err := p.Exec(ctx, postgreslock.RenewSQL(table), []string{name}, []string{"earlier"}, []int64{60000})
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("renewal of the earlier hold: %v, %v; want 1 row", tag, err)
	}
	var released bool
	if err := p.QueryRow(ctx, `SELECT upgrade_rows_release($1, 'earlier')`, name).Scan(&released); err != nil || !released {
		t.Fatalf("release of the earlier hold: %v, %v; want true", released, err)
	}
	lk, err := l.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("TryLock once the earlier hold is released: %v", err)
	}
	defer lk.Unlock(ctx)
	if lk.Fence() != 8 {
		t.Fatalf("fence %d; want 8", lk.Fence())
	}
}

// A holder that checked its fence in a transaction keeps others from
// taking the lock over until that transaction ends, even once its lease
// ran out: the takeover updates the name's row, which the check locked.
func TestTakeoverWaitsForFenceCheck(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	held, err := a.TryLock(ctx, t.Name(), dlock.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := a.CheckFence(ctx, tx, t.Name(), held.Fence()); err != nil {
		t.Fatalf("CheckFence of the holder: %v", err)
	}
	name := a.NameOf(t.Name())
	dlocktest.Eventually(t, 20*time.Second, "the lease run out on the server", func() bool {
		var lapsed bool
		err := p.QueryRow(ctx, `SELECT expires_at <= now() FROM dlock WHERE name = $1`, name).Scan(&lapsed)
		return err == nil && lapsed
	})
	b := newLocker(t, pool(t, ""))
	got := make(chan dlock.Lock, 1)
	errc := make(chan error, 1)
	go func() {
		lk, err := b.TryLock(ctx, t.Name())
		if err != nil {
			errc <- err
			return
		}
		got <- lk
	}()
	dlocktest.Eventually(t, 20*time.Second, "the takeover waiting for the checking transaction", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_acquire%'`).Scan(&n)
		return err == nil && n == 1
	})
	select {
	case lk := <-got:
		lk.Unlock(ctx)
		t.Fatal("the takeover did not wait for the checking transaction")
	case err := <-errc:
		t.Fatalf("TryLock: %v", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var lk dlock.Lock
	select {
	case lk = <-got:
	case err := <-errc:
		t.Fatalf("TryLock once the checking transaction ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("TryLock did not return")
	}
	defer lk.Unlock(ctx)
	if lk.Fence() <= held.Fence() {
		t.Fatalf("the new holder's fence %d is not above %d", lk.Fence(), held.Fence())
	}
	tx2, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	if err := a.CheckFence(ctx, tx2, t.Name(), held.Fence()); !errors.Is(err, postgreslock.ErrFenceStale) {
		t.Fatalf("CheckFence of the old holder after the takeover: %v; want ErrFenceStale", err)
	}
}

// A release that waits for the transaction of a waiter's registration
// (which locked the name's row) finds that waiter once it may go on: it
// grants it the lock and sends its NOTIFY. The test's transaction makes
// the registration, on a waiter whose channel the test listens on.
func TestReleaseFindsWaiterRegisteredMeanwhile(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	name := a.NameOf(t.Name())
	listen := listenTo(t, "dlock_regmeanwhile")
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var fence, retry int64
	if err := tx.QueryRow(ctx, `SELECT fence, coalesce(retry_ms, 0) FROM dlock_acquire($1, 'attempt', 'l', '', 60000, 0, 'regmeanwhile.1', 60000, 'granted')`, name).Scan(&fence, &retry); err != nil {
		t.Fatal(err)
	}
	if fence != 0 {
		t.Fatalf("the waiter's attempt took fence %d; want it busy", fence)
	}
	released := make(chan error, 1)
	go func() { released <- held.Unlock(ctx) }()
	dlocktest.Eventually(t, 20*time.Second, "the release waiting for the registration's transaction", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_release%'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no NOTIFY for the waiter registered meanwhile: %v", err)
	}
	if want := "regmeanwhile.1=" + strconv.FormatUint(held.Fence()+1, 10) + " " + name; n.Payload != want {
		t.Fatalf("NOTIFY %q; want %q", n.Payload, want)
	}
	var token string
	if err := p.QueryRow(ctx, `SELECT token FROM dlock WHERE name = $1`, name).Scan(&token); err != nil || token != "granted" {
		t.Fatalf("the row's hold after the release: %q, %v; want the grant's", token, err)
	}
	if _, err := p.Exec(ctx, `SELECT dlock_release($1, 'granted')`, name); err != nil {
		t.Fatal(err)
	}
}

// An uncontended acquisition of a lock, and its release, are plain
// statements (an UPDATE of the name's row, or the INSERT of a new name's):
// neither runs a function of the schema, and each answers one row.
func TestUncontendedCycleRunsNoFunction(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	l := newLocker(t, p)
	name := l.NameOf(t.Name())
	lk, err := l.TryLock(ctx, t.Name()) // makes the row
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
		t.Fatal(err)
	}
	calls := func() int64 {
		t.Helper()
		var n int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_xact_user_functions WHERE funcname LIKE 'dlock\_%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rows := func(sql string, args ...any) int {
		t.Helper()
		rs, err := tx.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rs.Next() {
			n++
		}
		if rs.Close(); rs.Err() != nil {
			t.Fatal(rs.Err())
		}
		return n
	}
	if n := rows(postgreslock.AcquireSQL("dlock"), name, "plain", "l", "", int64(60000), 0, "", int64(0), ""); n != 1 {
		t.Fatalf("the acquisition answered %d rows; want 1", n)
	}
	if n := calls(); n != 0 {
		t.Fatalf("the uncontended acquisition ran %d functions; want 0", n)
	}
	if n := rows(postgreslock.ReleaseSQL("dlock"), name, "plain"); n != 1 {
		t.Fatalf("the release answered %d rows; want 1", n)
	}
	if n := calls(); n != 0 {
		t.Fatalf("the release ran %d functions; want 0", n)
	}
	// A name never taken: its row is inserted, with no function either.
	if n := rows(postgreslock.AcquireSQL("dlock"), name+":new", "plain", "l", "", int64(60000), 0, "", int64(0), ""); n != 1 {
		t.Fatalf("the first acquisition of a name answered %d rows; want 1", n)
	}
	if n := calls(); n != 0 {
		t.Fatalf("the first acquisition of a name ran %d functions; want 0", n)
	}
	// Busy: the function answers, once.
	if n := rows(postgreslock.AcquireSQL("dlock"), name, "a", "l", "", int64(60000), 0, "", int64(0), ""); n != 1 {
		t.Fatalf("the acquisition answered %d rows; want 1", n)
	}
	if n := rows(postgreslock.AcquireSQL("dlock"), name, "b", "l", "", int64(60000), 0, "", int64(0), ""); n != 1 {
		t.Fatalf("the busy acquisition answered %d rows; want 1", n)
	}
	if n := calls(); n != 1 {
		t.Fatalf("the busy acquisition ran %d functions; want 1 (the acquire function)", n)
	}
}

// A release whose first waiter is leaving meanwhile (its registration's
// deletion not yet committed) grants the next waiter once the leaving
// commits, not the one that left: nobody would take that hold until its
// lease ends.
func TestReleaseSkipsWaiterLeavingMeanwhile(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	name := a.NameOf(t.Name())
	for _, w := range []string{"1", "2"} {
		var fence int64
		if err := p.QueryRow(ctx, `SELECT fence FROM dlock_acquire($1, 'attempt', 'l', '', 60000, 0, 'leaving.'||$2, 60000, 'grant'||$2)`, name, w).Scan(&fence); err != nil || fence != 0 {
			t.Fatalf("waiter %s's registration: fence %d, %v; want it busy", w, fence, err)
		}
	}
	listen := listenTo(t, "dlock_leaving")
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM dlock_waiters WHERE name = $1 AND waiter = 'leaving.1'`, name); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- held.Unlock(ctx) }()
	dlocktest.Eventually(t, 20*time.Second, "the release waiting for the leaving waiter's transaction", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_release%'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	var token string
	if err := p.QueryRow(ctx, `SELECT token FROM dlock WHERE name = $1`, name).Scan(&token); err != nil || token != "grant2" {
		t.Fatalf("the row's hold after the release: %q, %v; want the second waiter's grant", token, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no NOTIFY for the second waiter: %v", err)
	}
	if want := "leaving.2=" + strconv.FormatUint(held.Fence()+1, 10) + " " + name; n.Payload != want {
		t.Fatalf("NOTIFY %q; want %q", n.Payload, want)
	}
	if _, err := p.Exec(ctx, `SELECT dlock_release($1, 'grant2')`, name); err != nil {
		t.Fatal(err)
	}
}

// listenTo returns a connection of its own to the shared server that
// LISTENs on channel, closed when t ends.
func listenTo(t *testing.T, channel string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	return conn
}
