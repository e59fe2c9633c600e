package postgreslock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// A release that would grant the lock while an acquisition holds the
// name's row (it bumped the fence, and now locks the hold in its way to
// register as a waiter) does not wait for that row: the two would wait
// for each other, PostgreSQL would abort one after deadlock_timeout, and
// the release could fail, leaving its hold to lapse at its lease. The
// test's transaction stands for the acquisition: it locks the name's row,
// the release starts and blocks there, and then the transaction locks
// the hold.
func TestReleaseDoesNotDeadlockWithAnAcquisition(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	w := newLocker(t, pool(t, ""))
	got := waiting(t, w, t.Name(), 1, dlock.WithTTL(time.Minute))
	name := a.NameOf(t.Name())
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM dlock WHERE name = $1 FOR UPDATE`, name); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- held.Unlock(ctx) }()
	dlocktest.Eventually(t, 20*time.Second, "the release waiting for the name's row or done", func() bool {
		select {
		case err := <-released:
			released <- err
			return true
		default:
		}
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_release%'`).Scan(&n)
		return err == nil && n == 1
	})
	if _, err := tx.Exec(ctx, `SELECT 1 FROM dlock_holds WHERE name = $1 FOR SHARE`, name); err != nil {
		t.Fatalf("the acquisition's lock of the hold: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Unlock did not return")
	}
	take(t, got, 20*time.Second).Unlock(ctx)
}
