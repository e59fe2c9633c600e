package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// lapser is driver.Lapser, which package dlock cannot import.
type lapser interface {
	UnlockAfter(ctx context.Context, d time.Duration) error
}

// UnlockAfter releases lk by letting its lease lapse d from now: the way
// to keep a key taken for a while after the work under it is done, even
// after the process exits (a scheduled job that must not run twice in one
// tick on hosts whose clocks disagree). The lock's lease is set to d
// (rounded up to what the store can express) and no longer renewed; the
// handle ends as released at once (Done closes, Err matches ErrNotHeld),
// and the store deletes the lock when d has passed. An owner's lock whose
// lease is longer than d keeps it (its other holds need it). A d of zero
// or less is Unlock.
//
// It returns what Unlock returns for a lock that is no longer held, and
// an error matching errors.ErrUnsupported, changing nothing, when lk
// cannot lapse: every driver's locks can. An error that leaves the outcome
// unknown leaves the handle held, no longer renewed, to lapse at its
// deadline.
func UnlockAfter(ctx context.Context, lk Lock, d time.Duration) error {
	l, ok := lk.(lapser)
	if !ok {
		return &KeyError{Op: "unlock", Key: lk.Key(), Err: fmt.Errorf("%T cannot lapse: %w", lk, errors.ErrUnsupported)}
	}
	return l.UnlockAfter(ctx, d)
}
