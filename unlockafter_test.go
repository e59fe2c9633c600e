package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// lapsing is a fake lock that can lapse: it records the delay it was
// given.
type lapsing struct {
	*fakeLock
	after time.Duration
}

func (l *lapsing) UnlockAfter(_ context.Context, d time.Duration) error {
	l.after = d
	l.end(&dlock.KeyError{Key: l.Key(), Err: dlock.ErrNotHeld})
	return nil
}

// UnlockAfter hands the delay to a lock that can lapse, and refuses one
// that cannot with errors.ErrUnsupported, leaving it held.
func TestUnlockAfter(t *testing.T) {
	ctx := context.Background()
	lk := &lapsing{fakeLock: newFakeLock()}
	if err := dlock.UnlockAfter(ctx, lk, time.Minute); err != nil || lk.after != time.Minute || lk.Err() == nil {
		t.Errorf("UnlockAfter of a lock that lapses: %v, lapse after %v, ended %v; want nil, 1m0s, true", err, lk.after, lk.Err() != nil)
	}
	plain := newFakeLock()
	err := dlock.UnlockAfter(ctx, plain, time.Minute)
	if !errors.Is(err, errors.ErrUnsupported) || plain.Err() != nil {
		t.Errorf("UnlockAfter of a lock that cannot lapse: %v, ended %v; want errors.ErrUnsupported, false", err, plain.Err() != nil)
	}
}
