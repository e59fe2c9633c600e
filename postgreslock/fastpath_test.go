package postgreslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// An acquisition that reads the key free while another one, not yet
// committed, takes it, waits for that one's fence bump and then finds its
// hold: it is refused, and leaves the fence as the other one set it. The
// other acquisition runs in a transaction the test holds open, and the
// Locker's TryLock is let go only once it waits for that transaction's
// row lock.
func TestTakeWaitsForATakeInFlight(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	l := newLocker(t, p)
	key := t.Name()
	name := l.NameOf(key)
	// The name's first acquisition makes its row; the race is on the
	// update of that row, which every later acquisition makes.
	first, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var fence, retry int64
	if err := tx.QueryRow(ctx, `SELECT fence, coalesce(retry_ms, 0) FROM dlock_acquire($1, 'in-flight', 'l', '', 60000, 0, '', 0, '')`, name).Scan(&fence, &retry); err != nil {
		t.Fatal(err)
	}
	if fence != int64(first.Fence())+1 {
		t.Fatalf("the open transaction took fence %d; want %d", fence, first.Fence()+1)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := l.TryLock(ctx, key)
		if err == nil {
			err = errors.New("TryLock took the key")
			lk.Unlock(ctx)
		}
		got <- err
	}()
	dlocktest.Eventually(t, 20*time.Second, "the TryLock waiting for the open transaction's row lock", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_acquire%'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock: %v; want %v", err, dlock.ErrNotAcquired)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("TryLock did not return")
	}
	var holds int
	var now int64
	if err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM dlock_holds WHERE name = $1) + (SELECT count(*) FROM dlock WHERE name = $1 AND token <> ''), (SELECT fence FROM dlock WHERE name = $1)`, name).Scan(&holds, &now); err != nil {
		t.Fatal(err)
	}
	if holds != 1 || now != fence {
		t.Fatalf("%d holds and fence %d after the refused TryLock; want 1 and %d", holds, now, fence)
	}
	if _, err := p.Exec(ctx, `SELECT dlock_release($1, 'in-flight')`, name); err != nil {
		t.Fatal(err)
	}
}
