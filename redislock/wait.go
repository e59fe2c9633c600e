package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// Lock waits until it holds key. Waiters queue in Redis, and a release
// hands the lock to the first live waiter and wakes it (and only it) on the
// lock's channel, so a busy key changes hands at network speed:
//
//  1. one attempt, like TryLock (the uncontended path: one round trip);
//  2. when busy, the Locker subscribes to the key's channel (one connection
//     for all its waiters), then attempts again and joins the queue in the
//     same round trip, so no release between the two can be missed;
//  3. it sleeps until woken, or for the fallback min(next retry delay,
//     holder's remaining lease) so that a lost message or a crashed holder
//     never strands it; each attempt also renews its place in the queue,
//     which lapses 2*delay+250ms after the last attempt so a crashed
//     waiter cannot block the queue for longer;
//
// When the Locker is already subscribed to the key's channel (it waited on
// the key recently), steps 1 and 2 are one: the first attempt joins the
// queue.
//  4. a woken waiter confirms its grant in one round trip.
//
// In fair mode (dlock.WithFair) a newcomer never takes a free lock while a
// live waiter queues ahead of it. In the default mode a newcomer may take a
// free lock (no queue to join on the fast path), but a release always hands
// the lock to the head of the queue, so queued waiters are served in order.
//
// With dlock.WithNotify(false) a waiter neither subscribes nor queues: it
// polls at the pace of its retry strategy.
//
// Across processes, only the process of the waiter at the head of the
// queue is woken; every Locker keeps its own single subscription.
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, o, err := l.prepare(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	got, err := l.wait(ctx, lk, o)
	if err != nil {
		l.forget(lk)
		return nil, err
	}
	return got, nil
}

func (l *Locker) wait(ctx context.Context, lk *lock, o dlock.Options) (*lock, error) {
	single := o.Waiting && o.Wait == 0 // WithWait(0): one attempt, like TryLock
	base := modeTry
	if o.Fair {
		base |= modeFair
	}
	queue := base
	if (o.Notify || o.Fair) && !single {
		queue |= modeWait // a fair waiter queues even when it polls
	}

	// When this Locker is already subscribed to the key's channel (a hot
	// key), the first attempt joins the queue at once; otherwise it is a
	// plain attempt, and the waiter subscribes only if the lock is busy.
	var (
		wake    <-chan struct{}
		unwatch = func() {}
	)
	defer func() { unwatch() }()
	watch := func() {
		if o.Notify {
			wake, unwatch = l.notify.watch(ctx, lk.keys.queue, lk.token)
		}
	}
	mode, claim := base, time.Duration(0)
	if queue&modeWait != 0 && o.Notify && l.notify.ready(lk.keys.queue) {
		watch()
		mode, claim = queue, claimFor(o.Retry.Interval())
	}
	queued := mode&modeWait != 0
	fence, retryAfter, err := l.attempt(ctx, lk, mode, claim)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &dlock.NotAcquiredError{Key: lk.key, Err: ctx.Err()}
		}
		return nil, err
	}
	if fence > 0 {
		return l.acquired(ctx, lk, fence)
	}
	busy := func(cause error) error {
		return &dlock.NotAcquiredError{Key: lk.key, RetryAfter: retryAfter, Err: cause}
	}
	if single {
		return nil, busy(nil)
	}
	leave := func(cause error) error {
		if queued {
			l.giveBack(ctx, lk)
		}
		return busy(cause)
	}
	var limit <-chan time.Time
	if o.Waiting {
		t := time.NewTimer(o.Wait)
		defer t.Stop()
		limit = t.C
	}
	if wake == nil {
		watch()
	}

	backoff := o.Retry.Start()
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	// A waiter that did not join the queue yet attempts again right after
	// subscribing: a release in between is then never missed.
	delay, again := o.Retry.Interval(), !queued
	for {
		if again {
			var ok bool
			if delay, ok = backoff.Next(); !ok {
				return nil, leave(nil)
			}
			fence, retryAfter, err = l.attempt(ctx, lk, queue, claimFor(delay))
			queued = queue&modeWait != 0
			if err != nil {
				if ctx.Err() != nil {
					return nil, leave(ctx.Err())
				}
				return nil, err // attempt gave the lock back if it had taken it
			}
			if fence > 0 {
				return l.acquired(ctx, lk, fence)
			}
		}
		again = true
		if retryAfter > 0 && retryAfter < delay {
			delay = retryAfter
		}
		sleep.Reset(delay)
		select {
		case <-wake:
		case <-sleep.C:
		case <-limit:
			return nil, leave(nil)
		case <-ctx.Done():
			return nil, leave(ctx.Err())
		case <-l.quit:
			return nil, leave(dlock.ErrClosed)
		}
		if !sleep.Stop() {
			select {
			case <-sleep.C:
			default:
			}
		}
	}
}

// claimFor is how long a queue entry stays valid after an attempt followed
// by a sleep of at most delay: a waiter that stops coming back (a crash)
// loses its place, and a grant made to it lapses, after that long.
func claimFor(delay time.Duration) time.Duration { return 2*delay + 250*time.Millisecond }
