package postgreslock_test

import (
	"context"
	"testing"
)

// An uncontended TryLock and Unlock on a context that never ends (as
// context.Background) costs few allocations: the statements' bounds are
// contexts that requests share, not a context, a timer and a
// registration of their own each, which were a good part of the client's
// CPU per cycle. The bound leaves room for the allocations of pgx and of
// the handle; a context per request would exceed it.
func TestCycleAllocs(t *testing.T) {
	l := newLocker(t, pool(t, ""))
	ctx := context.Background()
	key := t.Name()
	var failed error
	cycle := func() {
		lk, err := l.TryLock(ctx, key)
		if err == nil {
			err = lk.Unlock(ctx)
		}
		if err != nil && failed == nil {
			failed = err
		}
	}
	for range 20 { // the pool's connection, its prepared statements
		cycle()
	}
	n := testing.AllocsPerRun(200, cycle)
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("%.1f allocations per cycle", n)
	const most = 40
	if n > most {
		t.Fatalf("an uncontended cycle made %.1f allocations; want at most %d", n, most)
	}
}
