package postgreslock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
)

// An RUnlock that runs while the same handle's Downgrade completes reads
// the hold's kind as the Downgrade changes it: the race detector finds an
// unguarded write (it did before the kind became one atomic value). The
// RUnlock is refused until the Downgrade lands, then releases the read
// lock it made.
func TestRUnlockRacingDowngrade(t *testing.T) {
	l := newLocker(t, pool(t, ""))
	ctx := context.Background()
	lk, err := l.TryWLock(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	downgraded := make(chan error, 1)
	go func() { downgraded <- dlock.Downgrade(ctx, lk) }()
	for {
		err := l.RUnlock(ctx, t.Name())
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("RUnlock while the Downgrade runs: %v; want nil or ErrNotHeld", err)
		}
	}
	if err := <-downgraded; err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock after the RUnlock: %v; want ErrNotHeld", err)
	}
}
