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
	mode := modeTry
	if o.Fair {
		mode |= modeFair
	}
	fence, retryAfter, err := l.attempt(ctx, lk, mode, 0)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &dlock.NotAcquiredError{Key: lk.key, Err: ctx.Err()}
		}
		return nil, err
	}
	if fence > 0 {
		return l.acquired(lk, fence), nil
	}
	busy := func(cause error) error {
		return &dlock.NotAcquiredError{Key: lk.key, RetryAfter: retryAfter, Err: cause}
	}
	if o.Waiting && o.Wait == 0 {
		return nil, busy(nil)
	}
	var limit <-chan time.Time
	if o.Waiting {
		t := time.NewTimer(o.Wait)
		defer t.Stop()
		limit = t.C
	}

	var wake <-chan struct{}
	if o.Notify {
		w, unwatch := l.notify.watch(ctx, lk.keys.queue, lk.token)
		defer unwatch()
		wake = w
	}
	if o.Notify || o.Fair {
		mode |= modeWait // a fair waiter queues even when it polls
	}
	queued := false
	leave := func(cause error) error {
		if queued {
			l.giveBack(ctx, lk)
		}
		return busy(cause)
	}

	backoff := o.Retry.Start()
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	for {
		delay, ok := backoff.Next()
		if !ok {
			return nil, leave(nil)
		}
		claim := 2*delay + 250*time.Millisecond
		fence, retryAfter, err = l.attempt(ctx, lk, mode, claim)
		queued = mode&modeWait != 0
		if err != nil {
			if ctx.Err() != nil {
				return nil, leave(ctx.Err())
			}
			return nil, err // attempt gave the lock back if it had taken it
		}
		if fence > 0 {
			return l.acquired(lk, fence), nil
		}
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
