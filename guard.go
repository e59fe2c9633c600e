package dlock

import (
	"context"
	"errors"
	"time"
)

// ReleaseTimeout bounds the release that a Guard's release function makes,
// on a context detached from the caller's so that a cancelled caller still
// releases.
const ReleaseTimeout = 5 * time.Second

// Guard ties work to a held lock. It returns a context derived from ctx that
// is cancelled, with the loss as its cause (context.Cause), the moment lk is
// lost, and a release function that stops watching, unlocks lk and returns
// the loss (matching ErrLockLost) when the lock was lost, else the error of
// the unlock. The release runs on a context detached from ctx, bounded by
// ReleaseTimeout. Call release exactly once, typically deferred.
func Guard(ctx context.Context, lk Lock) (guarded context.Context, release func() error) {
	guarded, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lk.Done():
			if lost := lk.Err(); errors.Is(lost, ErrLockLost) {
				cancel(lost)
			}
		case <-stop:
		}
	}()
	return guarded, func() error {
		close(stop)
		<-watched
		cancel(nil)
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer done()
		err := lk.Unlock(rctx)
		if lost := lk.Err(); errors.Is(lost, ErrLockLost) {
			return lost
		}
		return err
	}
}
