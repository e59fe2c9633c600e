package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// Lock waits until it holds key. Waiters queue in Redis, and a release
// hands the lock to the first live waiter and wakes it (and only it) on the
// channel of its Locker for that key, so a busy key changes hands at
// network speed:
//
//  1. one attempt, like TryLock (the uncontended path: one round trip);
//  2. when busy, the Locker subscribes to its channel of the key (one connection
//     for all its waiters), then attempts again and joins the queue in the
//     same round trip, so no release between the two can be missed;
//  3. it sleeps until woken, or for the fallback min(next retry delay,
//     holder's remaining lease) so that a lost message or a crashed holder
//     never strands it; each attempt also renews its place in the queue,
//     which lapses 2*delay+250ms after the last attempt so a crashed
//     waiter cannot block the queue for longer;
//
// When the Locker is already subscribed to its channel of the key (it waited on
// the key recently), steps 1 and 2 are one: the first attempt joins the
// queue.
//  4. a release grants the lock to the first waiter for its claim window,
//     which the waiter's watchdog extends to the TTL a third of the way in:
//     the woken waiter returns without a round trip of its own.
//
// In fair mode (dlock.WithFair) a newcomer never takes a free lock while a
// live waiter queues ahead of it. In the default mode a newcomer may take a
// free lock (no queue to join on the fast path), but a release always hands
// the lock to the head of the queue, so queued waiters are served in order.
//
// With dlock.WithNotify(false) a waiter neither subscribes nor queues: it
// polls at the pace of its retry strategy.
//
// Only the Locker of the waiter at the head of the queue is woken: every
// Locker keeps its own single subscription connection, and hears only the
// grants made to its own waiters.
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, o, err := l.prepare(ctx, key, opts, true)
	if err != nil {
		return nil, err
	}
	defer l.waiting.Done()
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

	// When this Locker is already subscribed to its channel of the key (a hot
	// key), the first attempt joins the queue at once; otherwise it is a
	// plain attempt, and the waiter subscribes only if the lock is busy.
	var (
		wake    <-chan grant
		unwatch = func() {}
		n       int64     // the number of the last attempt that joined the queue
		sent    time.Time // when it was sent
		claim   time.Duration
	)
	defer func() { unwatch() }()
	watch := func() {
		if o.Notify {
			wake, unwatch = l.notify.watch(ctx, l.channel(lk), lk.token)
		}
	}
	mode := base
	if queue&modeWait != 0 && o.Notify && l.notify.ready(l.channel(lk)) {
		watch()
		mode, claim, n = queue, claimFor(o.Retry.Interval()), 1
	}
	queued := mode&modeWait != 0
	sent = time.Now()
	held, retryAfter, err := l.attempt(ctx, lk, mode, claim, n)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &dlock.NotAcquiredError{Key: lk.key, Err: ctx.Err()}
		}
		return nil, err
	}
	if held {
		return l.acquired(ctx, lk)
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
			n, sent, claim = n+1, time.Now(), claimFor(delay)
			held, retryAfter, err = l.attempt(ctx, lk, queue, claim, n)
			queued = queue&modeWait != 0
			if err != nil {
				if ctx.Err() != nil {
					return nil, leave(ctx.Err())
				}
				return nil, err // attempt gave the lock back if it had taken it
			}
			if held {
				return l.acquired(ctx, lk)
			}
		}
		again = true
		if retryAfter > 0 && retryAfter < delay {
			delay = retryAfter
		}
		sleep.Reset(delay)
		select {
		case g := <-wake:
			if lk, ok := l.granted(lk, g, n, sent, claim, o); ok {
				return l.acquired(ctx, lk)
			}
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

// granted reports whether the wake-up g hands the lock to lk for good: it
// names the waiter's last attempt n, which was sent at sent with claim. The
// grant then lasts until sent+claim at least, and the watchdog extends it
// to the TTL a third of the way into it, so the waiter returns without a
// round trip of its own. A grant to an older attempt (it may have lapsed), one that is too
// close to its end, or one for a lock without watchdog is confirmed by the
// next attempt instead.
func (l *Locker) granted(lk *lock, g grant, n int64, sent time.Time, claim time.Duration, o dlock.Options) (*lock, bool) {
	if g.attempt != n || !o.AutoRenew {
		return nil, false
	}
	deadline := sent.Add(claim - drift(claim))
	if time.Until(deadline) < claim/2 {
		return nil, false
	}
	lk.fence, lk.deadline, lk.renewNow = g.fence, deadline, true
	return lk, true
}

// channel is where the release that grants lk to one of this Locker's
// waiters says so.
func (l *Locker) channel(lk *lock) string { return lk.keys.queue + ":" + l.sub }

// claimFor is how long a queue entry stays valid after an attempt followed
// by a sleep of at most delay: a waiter that stops coming back (a crash)
// loses its place, and a grant made to it lapses, after that long.
func claimFor(delay time.Duration) time.Duration { return 2*delay + 250*time.Millisecond }
