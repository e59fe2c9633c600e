package dlock

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/internal/settings"
)

// releaseTimeout bounds the release that a Guard's release function
// makes, on a context detached from the caller's so that a cancelled
// caller still releases.
const releaseTimeout = settings.ReleaseTimeout

// Guard ties work to a held lock. It returns a context derived from ctx,
// which carries lk (see [LockFrom]), and a release function.
//
// The context is cancelled the moment the hold ends for any reason other
// than release: the lock was lost (the cause matches ErrLockLost), its
// Locker was closed (the cause matches ErrClosed), or it was released
// elsewhere (ErrNotHeld). context.Cause says which. Work under a hold that
// ended must stop, for another party may hold the key already.
//
// release stops watching, unlocks lk and returns nil when the hold was
// still in place; otherwise it returns why the hold had ended. The unlock
// runs on a context detached from ctx, bounded by a timeout of 5s. Call
// release exactly once, typically deferred.
func Guard(ctx context.Context, lk Lock) (guarded context.Context, release func() error) {
	guarded, cancel := context.WithCancelCause(context.WithValue(ctx, lockKey{}, lk))
	stop := make(chan struct{})
	watched := make(chan struct{})
	var ended error // why the hold ended before release; set before watched closes
	go func() {
		defer close(watched)
		select {
		case <-lk.Done():
			if ended = lk.Err(); ended == nil {
				ended = ErrNotHeld // a Lock whose Err lags its Done
			}
			cancel(ended)
		case <-stop:
		}
	}()
	return guarded, func() error {
		close(stop)
		<-watched
		cancel(nil)
		if ended != nil {
			return ended
		}
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer done()
		err := lk.Unlock(rctx)
		if lost := lk.Err(); errors.Is(lost, ErrLockLost) {
			return lost
		}
		return err
	}
}

type lockKey struct{}

// LockFrom returns the lock that guards ctx: the one held by the [Do] or
// [Guard] that made ctx (or, for an HTTP handler, by package httplock).
// Its Fence is the fencing token to hand to the storage the lock protects.
func LockFrom(ctx context.Context) (Lock, bool) {
	lk, ok := ctx.Value(lockKey{}).(Lock)
	return lk, ok
}
