package postgreslock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// One Locker takes two permits of a semaphore without owner, as it may
// on every driver: each is a hold of its own, shown without owner, and
// Release gives back the most recent.
func TestSemaphoreTwoPermitsOneLocker(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, pool(t, ""))
	key := t.Name()
	a, err := l.TryAcquire(ctx, key, 2, dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, key, 2, dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("the second permit of the same Locker: %v", err)
	}
	info, err := l.InspectKind(ctx, dlock.KindSemaphore, key)
	if err != nil || info.Holds != 2 || info.Owner != "" {
		t.Fatalf("InspectKind: %+v, %v; want 2 holds without owner", info, err)
	}
	if err := l.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	if b.Err() == nil || a.Err() != nil {
		t.Fatalf("Release gave back %v / %v; want the most recent permit", a.Err(), b.Err())
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
