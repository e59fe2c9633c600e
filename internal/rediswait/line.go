package rediswait

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// A Waiter is one waiting Lock call, as [Line] drives it: the driver's
// algorithm (one server's attempt, or a majority's) behind its calls.
type Waiter interface {
	// Attempt makes one attempt that keeps the waiter's place in the
	// queue for a sleep of about delay. An attempt that fails gives back
	// whatever it may have taken before it returns, and one that ends
	// the wait (a fatal error, or ctx's end) leaves the queue too.
	Attempt(ctx context.Context, delay time.Duration) Outcome
	// Woken takes in a wake-up heard while the waiter sleeps: the lock
	// may be handed over, or the waiter may be asked to attempt at once.
	// A fatal error ends the wait as for Attempt.
	Woken(ctx context.Context, g Wake) Outcome
	// Leave ends a wait that did not get the lock: out of the queue, and
	// whatever the waiter may hold given back, within the wait's bound.
	Leave(ctx context.Context)
	// Settling, when not nil, is closed once a request that the waiter
	// stopped waiting for ended: until then it neither attempts nor
	// takes a grant. It returns nil once it is closed.
	Settling() <-chan struct{}
}

// An Outcome is what an attempt or a wake-up came to.
type Outcome struct {
	Held  bool          // the lock is the waiter's
	Err   error         // the attempt failed (what it took is given back)
	Fatal bool          // Err ends the wait; otherwise it may pass by itself
	Again bool          // attempt again at once, not after the sleep
	Sleep time.Duration // the sleep before the next attempt (attempts only)
	// RetryAfter is the holder's remaining lease, as the attempt saw it
	// (zero: not seen).
	RetryAfter time.Duration
}

// A Line is one wait, after a first attempt found the lock busy: its
// bounds and the wake-ups it listens for.
type Line struct {
	Key   string
	Retry dlock.RetryStrategy
	End   time.Time       // the wait's limit; zero: none
	Wake  <-chan Wake     // wake-ups from the Locker's subscriber; nil: polling
	Quit  <-chan struct{} // closed when the Locker closes
	// First is the sleep before the first attempt of the loop, when the
	// attempt before the loop joined the queue; zero: attempt at once.
	First      time.Duration
	Failed     error         // the attempt before the loop's error, when it may pass by itself
	RetryAfter time.Duration // the holder's remaining lease, as that attempt saw it
}

// Wait attempts, sleeps and takes wake-ups until w holds the lock (nil),
// the wait ends (an error matching dlock.ErrNotAcquired, with the last
// attempt's error as its cause when it failed), or an attempt fails for
// good (its error). No attempt begins after the limit, and the waiter
// leaves the queue when the wait ends without the lock.
func (ln *Line) Wait(ctx context.Context, w Waiter) error {
	var limit <-chan time.Time
	if !ln.End.IsZero() {
		t := time.NewTimer(time.Until(ln.End))
		defer t.Stop()
		limit = t.C
	}
	busy := func(cause error) error {
		return &dlock.NotAcquiredError{Key: ln.Key, RetryAfter: ln.RetryAfter, Err: cause}
	}
	giveUp := func() error {
		w.Leave(ctx)
		return busy(ln.Failed)
	}
	// took reports whether an outcome ends the wait, and its error.
	took := func(out Outcome) (bool, error) {
		switch {
		case out.Held:
			return true, nil
		case out.Err != nil && ctx.Err() != nil:
			return true, busy(ctx.Err())
		case out.Err != nil && out.Fatal:
			return true, out.Err
		case out.Err != nil:
			ln.Failed = out.Err
		}
		if out.RetryAfter > 0 {
			ln.RetryAfter = out.RetryAfter
		}
		return false, nil
	}
	backoff := driver.NewBackoff(ln.Retry)
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	delay, again := ln.First, ln.First == 0
	if again {
		delay = ln.Retry.Max // the sleep when settling holds the first attempt back
	}
	for {
		if again && w.Settling() == nil {
			d, ok := backoff.Next()
			if !ok || !ln.End.IsZero() && !time.Now().Before(ln.End) {
				return giveUp() // no attempt begins after the limit
			}
			out := w.Attempt(ctx, d)
			ln.Failed = nil
			if done, err := took(out); done {
				return err
			}
			delay = out.Sleep
		}
		again = true
		sleep.Reset(delay)
	sleeping:
		for {
			select {
			case g := <-ln.Wake:
				out := w.Woken(ctx, g)
				if done, err := took(out); done {
					return err
				}
				if out.Again {
					break sleeping
				}
			case <-w.Settling(): // nil unless settling: then it may attempt again
				break sleeping
			case <-sleep.C:
				break sleeping
			case <-limit:
				return giveUp()
			case <-ctx.Done():
				w.Leave(ctx)
				return busy(ctx.Err())
			case <-ln.Quit:
				w.Leave(ctx)
				return busy(dlock.ErrClosed)
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
