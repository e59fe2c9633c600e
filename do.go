package dlock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/internal/settings"
)

// Do acquires key with l.Lock (waiting as opts say), runs fn while holding
// it, and releases it when fn returns or panics; a panic continues after the
// release. fn's context carries the lock (see [LockFrom], for its fence),
// and is cancelled the moment the hold ends other than
// by Do's own release: the lock was lost, or l was closed; context.Cause
// says which (see [Guard]).
//
// When ctx carries no owner, Do gives fn's context a fresh one and acquires
// for it, so that fn can acquire the same key again (directly or through a
// nested Do) without waiting on itself.
//
// Do returns the acquisition error (matching ErrNotAcquired when busy), or
// fn's error, wrapped in one line with why the hold ended while fn ran
// (matching ErrLockLost, or ErrClosed) or with the release error: errors.Is
// matches either.
func Do(ctx context.Context, l Locker, key string, fn func(context.Context) error, opts ...Option) (err error) {
	if l == nil {
		return ErrNilClient
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = ContextWithOwner(ctx, settings.NewToken())
	}
	lk, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	guarded, release := Guard(ctx, lk)
	defer func() { err = both(err, release()) }()
	return fn(guarded)
}

// both is err, or end, or one line that wraps them both: fn's error, then
// why the hold ended or why its release failed.
func both(err, end error) error {
	switch {
	case end == nil:
		return err
	case err == nil:
		return end
	}
	return fmt.Errorf("%w; %w", err, end)
}
