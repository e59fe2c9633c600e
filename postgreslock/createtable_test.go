package postgreslock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/postgreslock"
)

// Processes that start together may each call CreateTable: concurrent
// calls on tables that do not exist yet all succeed (two at once failed
// with a unique violation on the catalog, SQLSTATE 23505).
func TestCreateTableConcurrently(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	table := fmt.Sprintf("dlock_concurrent_%d", time.Now().UnixNano()) // a table no earlier run made
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		l := newLocker(t, p, postgreslock.WithTable(table))
		wg.Go(func() { errs[i] = l.CreateTable(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("CreateTable %d of %d at once: %v", i+1, n, err)
		}
	}
	l := newLocker(t, p, postgreslock.WithTable(table))
	lk, err := l.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("TryLock on the table made: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
