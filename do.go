package dlock

import (
	"context"
	"errors"
	"time"
)

// ReleaseTimeout bounds the release that Do makes after fn returns, on a
// context detached from the caller's so that a cancelled caller still
// releases.
const ReleaseTimeout = 5 * time.Second

// Do acquires key with l.Lock (waiting as opts say), runs fn while holding
// it, and releases it when fn returns or panics; a panic continues after the
// release. fn's context is cancelled the moment the lock is lost, with the
// loss as its cause (context.Cause).
//
// When ctx carries no owner, Do gives fn's context a fresh one and acquires
// for it, so that fn can acquire the same key again (directly or through a
// nested Do) without waiting on itself.
//
// Do returns the acquisition error (matching ErrNotAcquired when busy), or
// fn's error, joined with the loss (matching ErrLockLost) when the lock was
// lost while fn ran, or with the release error.
func Do(ctx context.Context, l Locker, key string, fn func(context.Context) error, opts ...Option) (err error) {
	if l == nil {
		return ErrNilClient
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = WithOwner(ctx, NewToken())
	}
	lk, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
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
	defer func() {
		close(stop)
		<-watched
		cancel(nil)
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer done()
		uerr := lk.Unlock(rctx)
		if lost := lk.Err(); errors.Is(lost, ErrLockLost) {
			uerr = lost
		}
		err = errors.Join(err, uerr)
	}()
	return fn(fctx)
}
