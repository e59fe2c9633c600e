package election

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// RunOnce runs fn if no other process holds key, holding the lock while fn
// runs, and for at least holdAtLeast from the acquisition, whatever becomes
// of the process: a job that fires on several hosts at each tick of a
// schedule runs once per tick, provided that the hosts' clocks disagree by
// less than holdAtLeast and that holdAtLeast is shorter than the time
// between two ticks. It is TryRun, fn under dlock.Guard, and the Run's
// Unlock.
//
// It makes one attempt (TryLock): when another process holds key, it
// returns an error matching dlock.ErrNotAcquired and does not run fn. fn's
// context carries the lock (dlock.LockFrom, for its fence) and is
// cancelled the moment the lock is lost. It returns fn's error, joined
// with why the hold ended early or the release's error. See TryRun for
// the lease and for opts, and Run.Unlock for the end of the hold.
func RunOnce(ctx context.Context, l dlock.Locker, key string, holdAtLeast time.Duration, fn func(context.Context) error, opts ...dlock.Option) error {
	r, err := TryRun(ctx, l, key, holdAtLeast, opts...)
	if err != nil {
		return err
	}
	guarded, release := dlock.Guard(ctx, r.lk)
	err = fn(guarded)
	return errors.Join(err, r.end(ctx, release))
}

// A Run is the lock of one run of a scheduled job, taken by TryRun: the
// key stays taken from the acquisition for at least the run's hold, even
// if the process that runs the job dies or is cut off from the store
// meanwhile, and for as long as the job runs. Its Unlock ends it once the
// job returned. Package gocronlock's Locker hands Runs to gocron.
type Run struct {
	lk    dlock.Lock
	until time.Time // the end of the hold
}

// TryRun takes key's lock for one run of a job, without owner (ctx's owner
// is ignored, so that Unlock can let the lease lapse early) and with one
// attempt: when another process holds key, it returns an error matching
// dlock.ErrNotAcquired. It returns an error matching dlock.ErrNilClient
// for a nil Locker and dlock.ErrInvalidOption for a negative hold.
//
// opts apply to the acquisition, and the lease it gets is the longer of
// the one they set (dlock.WithTTL, else the Locker's) and holdAtLeast:
// the store then keeps the key for holdAtLeast from the moment the
// acquisition was sent even if nothing renews or releases it after that,
// and the watchdog renews that lease while the job runs. A job that
// refreshes its lock (dlock.Lock.Refresh) to a shorter lease gives that
// up. The hold that Unlock keeps after a job that returned counts from the
// moment the acquisition returned.
func TryRun(ctx context.Context, l dlock.Locker, key string, holdAtLeast time.Duration, opts ...dlock.Option) (*Run, error) {
	if l == nil {
		return nil, dlock.ErrNilClient
	}
	if holdAtLeast < 0 {
		return nil, driver.Invalid("run", key, "negative hold %v", holdAtLeast)
	}
	if holdAtLeast > 0 {
		opts = append(opts[:len(opts):len(opts)], leaseAtLeast(holdAtLeast))
	}
	lk, err := l.TryLock(dlock.ContextWithOwner(ctx, ""), key, opts...)
	if err != nil {
		return nil, err
	}
	return &Run{lk: lk, until: time.Now().Add(holdAtLeast)}, nil
}

// leaseAtLeast lengthens an acquisition's lease to at least d: placed
// after the other options, it sees the lease they and the Locker set.
func leaseAtLeast(d time.Duration) dlock.Option {
	return func(o *dlock.Options) { o.TTL = max(o.TTL, d) }
}

// Lock returns the run's lock.
func (r *Run) Lock() dlock.Lock { return r.lk }

// Unlock ends the run once its job returned. When the hold has passed, it
// releases the lock. Otherwise it lets the lock lapse when the hold ends
// (see driver.Lapser), so that the key stays taken even if the process
// exits; a lock that cannot lapse is held until then: Unlock waits, or
// returns when ctx ends, releasing it. It returns the release's error, or
// the loss that ended the hold.
func (r *Run) Unlock(ctx context.Context) error {
	return r.end(ctx, func() error { return r.lk.Unlock(context.WithoutCancel(ctx)) })
}

// end is Unlock with the release given: RunOnce's stops watching the lock
// too.
func (r *Run) end(ctx context.Context, release func() error) error {
	rest := time.Until(r.until)
	if rest <= 0 {
		return release()
	}
	if lapser, ok := r.lk.(driver.Lapser); ok && r.lk.Err() == nil {
		err := lapser.UnlockAfter(context.WithoutCancel(ctx), rest)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			// A lock of several keys, one of which cannot lapse: hold on.
		case err != nil:
			// Not released: the lock lapses (its handle ends) by itself,
			// and a guard stops watching it then.
			return err
		default:
			// The hold ended as released: release now only stops
			// watching it.
			if err := release(); errors.Is(err, dlock.ErrLockLost) {
				return err
			}
			return nil
		}
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.lk.Done():
	case <-ctx.Done():
	}
	return release()
}
