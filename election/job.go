package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// RunOnce runs fn if no other process holds key, holding the lock while fn
// runs, and for at least holdAtLeast from the acquisition: a job that
// fires on several hosts at each tick of a schedule runs once per tick,
// provided that the hosts' clocks disagree by less than holdAtLeast and
// that holdAtLeast is shorter than the time between two ticks.
//
// It makes one attempt (TryLock): when another process holds key, it
// returns an error matching dlock.ErrNotAcquired and does not run fn. fn's
// context carries the lock (dlock.LockFrom, for its fence) and is
// cancelled the moment the lock is lost. When fn returns before
// holdAtLeast has passed, the lock is left to lapse when it has (see
// dlock.Lapser), so the key stays taken even if the process exits; with a
// lock that cannot lapse, RunOnce keeps holding it until then, or until
// ctx ends. When fn runs longer, the lock is released when it returns.
//
// RunOnce acquires without owner (ctx's owner is ignored), so that the
// lapse can shorten the lease. opts apply to the acquisition
// (dlock.WithTTL: the lease renewed while fn runs). It returns fn's error,
// joined with why the hold ended early or the release's error.
func RunOnce(ctx context.Context, l dlock.Locker, key string, holdAtLeast time.Duration, fn func(context.Context) error, opts ...dlock.Option) error {
	if l == nil {
		return dlock.ErrNilClient
	}
	if holdAtLeast < 0 {
		return &dlock.KeyError{Op: "run", Key: key, Err: fmt.Errorf("%w: negative hold %v", dlock.ErrInvalidOption, holdAtLeast)}
	}
	lk, err := l.TryLock(dlock.ContextWithOwner(ctx, ""), key, opts...)
	if err != nil {
		return err
	}
	until := time.Now().Add(holdAtLeast) // the acquisition was before now
	guarded, release := dlock.Guard(ctx, lk)
	err = fn(guarded)
	return errors.Join(err, releaseAfter(ctx, lk, release, until))
}

// releaseAfter ends the hold of a job that returned: it releases the lock
// now if until has passed, else lets it lapse at until, or holds it until
// then when the lock cannot lapse.
func releaseAfter(ctx context.Context, lk dlock.Lock, release func() error, until time.Time) error {
	rest := time.Until(until)
	if rest <= 0 {
		return release()
	}
	if lapser, ok := lk.(dlock.Lapser); ok && lk.Err() == nil {
		if err := lapser.UnlockAfter(context.WithoutCancel(ctx), rest); err != nil {
			// Not released: the lock lapses (its handle ends) by itself,
			// and the guard stops watching it then.
			return err
		}
		// The hold ended as released: release now only stops watching it.
		if err := release(); errors.Is(err, dlock.ErrLockLost) {
			return err
		}
		return nil
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
	case <-lk.Done():
	case <-ctx.Done():
	}
	return release()
}
