package rediswait

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// Waiter is one waiting Lock call of a driver, as Loop drives it: the
// driver's attempt and its rule for a lock held by grants.
type Waiter interface {
	// Attempt makes the next attempt. It reports how long to sleep
	// before the one after (until a wake-up), or that the wait ended
	// (done) with err: nil when the lock is held. A waiter that may not
	// attempt yet (see Settling) sleeps again instead.
	Attempt(ctx context.Context) (delay time.Duration, done bool, err error)
	// Woken takes the wake-up w: it reports that the wait ended with err
	// (done; nil err: the grants hand the lock over), or that the waiter
	// attempts at once (again), or neither: it sleeps on.
	Woken(ctx context.Context, w Wake) (done, again bool, err error)
	// Settling, when not nil, is closed once a request that the waiter
	// stopped waiting for ended: it may attempt again then.
	Settling() <-chan struct{}
	// Leave ends the wait without the lock, for cause: ctx's error,
	// dlock.ErrClosed, or nil when the wait's limit passed.
	Leave(ctx context.Context, cause error) error
}

// Loop is the wait of w after its first attempt: it sleeps until woken
// on wake or for the delay of its last attempt, attempts again, and so
// on, until an attempt or a wake-up ends the wait, or ctx ends, or quit
// closes (the Locker's Close), or end passes (zero: no limit). It makes
// an attempt first when first is set.
func Loop(ctx context.Context, w Waiter, wake <-chan Wake, quit <-chan struct{}, end time.Time, first bool, delay time.Duration) error {
	var limit <-chan time.Time
	if !end.IsZero() {
		t := time.NewTimer(time.Until(end))
		defer t.Stop()
		limit = t.C
	}
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	again := first
	for {
		if again {
			var done bool
			var err error
			if delay, done, err = w.Attempt(ctx); done {
				return err
			}
		}
		again = true
		sleep.Reset(delay)
	sleeping:
		for {
			select {
			case g := <-wake:
				done, now, err := w.Woken(ctx, g)
				if done {
					return err
				}
				if now {
					break sleeping
				}
			case <-w.Settling(): // nil unless settling: then it may attempt again
				break sleeping
			case <-sleep.C:
				break sleeping
			case <-limit:
				return w.Leave(ctx, nil)
			case <-ctx.Done():
				return w.Leave(ctx, ctx.Err())
			case <-quit:
				return w.Leave(ctx, dlock.ErrClosed)
			}
		}
		if !sleep.Stop() {
			select {
			case <-sleep.C:
			default:
			}
		}
	}
}
