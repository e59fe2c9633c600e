package redislock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
)

// Readers overlap; a writer excludes everyone; fences of readers and
// writers come from one counter.
func TestRWLockExclusion(t *testing.T) {
	ctx := context.Background()
	a, b, c := newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))
	k := keyFor(t)
	r1 := mustHold(t)(a.TryRLock(ctx, k))
	r2 := mustHold(t)(b.TryRLock(ctx, k))
	if r2.Fence() <= r1.Fence() {
		t.Errorf("reader fences %d then %d, want growing", r1.Fence(), r2.Fence())
	}
	mustWait(t)(c.TryWLock(ctx, k))
	r1.Unlock(ctx)
	mustWait(t)(c.TryWLock(ctx, k)) // one reader left
	r2.Unlock(ctx)
	w := mustHold(t)(c.TryWLock(ctx, k))
	if w.Fence() <= r2.Fence() {
		t.Errorf("writer fence %d after reader %d, want growing", w.Fence(), r2.Fence())
	}
	mustWait(t)(a.TryRLock(ctx, k))
	mustWait(t)(b.TryWLock(ctx, k))
	info, err := a.InspectKind(ctx, dlock.KindRWLock, k)
	if err != nil || !info.Held || info.Holds != 1 || info.Readers != 0 {
		t.Errorf("inspect with a writer: %+v, %v", info, err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	mustHold(t)(a.TryRLock(ctx, k)).Unlock(ctx)
}
