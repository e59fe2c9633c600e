package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// releaseAfter gives lk back once CMD is done: now, when until has passed
// (--hold-at-least is 0, or CMD ran longer), else by leaving the lock to
// lapse at until (see driver.Lapser), so that dlock can exit at once and
// the key stays taken meanwhile. It warns when it cannot, and returns the
// error; a lock that is no driver.Lapser is released with a warning, never
// silently.
func releaseAfter(e *env, lk dlock.Lock, until time.Time) error {
	rest := time.Until(until)
	if rest <= 0 {
		return release(e, lk)
	}
	lapser, ok := lk.(driver.Lapser)
	if !ok { // the driver declared UnlockAfter (see runConfig.needs), but this lock lacks it
		fmt.Fprintf(e.stderr, "dlock: --hold-at-least: the lock on %q cannot lapse; releasing it now, %v early\n", lk.Key(), rest.Round(time.Millisecond))
		return release(e, lk)
	}
	ctx, cancel := context.WithTimeout(context.Background(), driver.ReleaseTimeout)
	defer cancel()
	err := lapser.UnlockAfter(ctx, rest)
	if err != nil && !errors.Is(err, dlock.ErrLockLost) {
		fmt.Fprintf(e.stderr, "dlock: could not set %q to free in %v (%v); it frees when its lease runs out\n", lk.Key(), rest.Round(time.Millisecond), trimDlock(err))
	}
	return err
}
