package redislock

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/rediswait"
	"github.com/redis/go-redis/v9"
)

// Lock waits until it holds key. Waiters queue in Redis, and a release
// hands the lock to the first live waiter and wakes it (and only it) on the
// channel of its Locker for that key, so a busy key changes hands at
// network speed:
//
//  1. one attempt, like TryLock (the uncontended path: one round trip);
//  2. when busy, the Locker subscribes to its channel of the key (one
//     connection per shard for all its waiters), then attempts again and
//     joins the queue in the same round trip, so no release between the
//     two can be missed;
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
// Locker keeps its own subscriptions, and hears only the grants made to
// its own waiters.
//
// A waiting Lock rides out attempts whose replies are lost or late (see
// RequestTimeout), and the refusals of a failover or a slot migration
// (CLUSTERDOWN, TRYAGAIN, READONLY, LOADING, MASTERDOWN), trying again
// until its wait ends; its error then matches dlock.ErrNotAcquired and
// the last such error too, so that a server out of reach is not taken for
// a busy lock. Any other error ends it at once. Each failed attempt gives
// back what it may have taken, before the next attempt.
//
// With a wait limit (dlock.WithWait), Lock returns within the limit, which
// counts from the call, plus RequestTimeout: no attempt begins after the
// limit, no request is waited for longer than RequestTimeout, and leaving
// the queue is waited for no longer than the rest of that bound.
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, o, err := l.prepare(ctx, key, opts, true)
	if err != nil {
		return nil, err
	}
	defer l.tables.Locks.Leave()
	got, err := l.wait(ctx, lk, o)
	if err != nil {
		l.tables.Locks.Remove(lk)
		l.tables.Locks.Failed(lk, !(o.Waiting && o.Wait == 0), err)
		return nil, err
	}
	return got, nil
}

// waiter is the state of one waiting Lock call: its attempts, its place in
// the queue and its wake-ups. The wait loop is rediswait's.
type waiter struct {
	l  *Locker
	lk *hold
	o  dlock.Options

	queue   attemptMode // the mode of the attempts that join the queue
	wake    <-chan rediswait.Wake
	unwatch func()

	n          int64         // the number of the last attempt that joined the queue
	sent       time.Time     // when it was sent
	claim      time.Duration // its claim window
	queued     bool          // an attempt joined the queue
	retryAfter time.Duration // the holder's remaining lease, as the last attempt saw it

	end time.Time // the wait's limit; zero: none
	// settling, when not nil, closes once a request of the waiter that
	// it stopped waiting for ended, and what it may have taken was given
	// back: until then the waiter neither attempts nor takes a grant, for
	// the give-back would undo them.
	settling <-chan struct{}
}

func (l *Locker) wait(ctx context.Context, lk *hold, o dlock.Options) (*hold, error) {
	single := o.Waiting && o.Wait == 0 // WithWait(0): one attempt, like TryLock
	w := &waiter{l: l, lk: lk, o: o, unwatch: func() {}}
	if o.Waiting {
		w.end = time.Now().Add(o.Wait) // the limit counts from the call
	}
	defer func() { w.unwatch() }()
	base := modeTry
	if o.Fair {
		base |= modeFair
	}
	w.queue = base
	if (o.Notify || o.Fair) && !single {
		w.queue |= modeWait // a fair waiter queues even when it polls
	}

	// When this Locker is already subscribed to its channel of the key (a
	// hot key), the first attempt joins the queue at once; otherwise it is
	// a plain attempt, and the waiter subscribes only if the lock is busy.
	mode, delay := base, time.Duration(0)
	if w.queue&modeWait != 0 {
		mode |= modeRetried // a busy reply is followed at once by an attempt that joins the queue
	}
	if w.queue&modeWait != 0 && o.Notify && l.notify.Ready(l.channel(lk)) {
		w.watch(ctx, time.Time{}) // confirmed already: returns at once
		mode, delay = w.queue, o.Retry.Max
	}
	held, err := w.attempt(ctx, mode, delay)
	line := rediswait.Line{Key: lk.Key(), Retry: o.Retry, End: w.end, Quit: l.quit, RetryAfter: w.retryAfter}
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, w.busy(ctx.Err()) // attempt gave back whatever it may hold
	case err != nil && (single || !transient(err)):
		return nil, err
	case err != nil:
		line.Failed = err // and wait on: attempt gave back whatever it may hold
	case held:
		return l.acquired(ctx, lk)
	case single:
		return nil, w.busy(nil)
	}
	l.tables.Locks.Waiting(lk)
	if w.wake == nil {
		w.watch(ctx, w.end)
	}
	// A waiter that did not join the queue yet attempts again right after
	// subscribing: a release in between is then never missed.
	if w.queued {
		line.First = w.sleep(o.Retry.Max)
	}
	line.Wake = w.wake
	if err := line.Wait(ctx, w); err != nil {
		return nil, err
	}
	return l.acquired(ctx, lk)
}

// watch subscribes the waiter to its Locker's channel of the key, waiting
// for the confirmation until the wait's end at the latest (zero: none).
func (w *waiter) watch(ctx context.Context, end time.Time) {
	if w.o.Notify {
		w.wake, w.unwatch = w.l.notify.Watch(ctx, w.l.channel(w.lk), w.lk.Token(), end, nil)
	}
}

// attempt makes one attempt in mode; one that joins the queue is numbered
// and keeps its place for the claim window of a sleep of delay. A failed
// attempt gave back what it may have taken, and left the queue: a grant
// made to it is void, and its number is passed, so that a wake-up that
// names it is not taken for a grant. When the attempt, or its give-back,
// was not waited for to the end, the waiter is settling until it ended.
func (w *waiter) attempt(ctx context.Context, mode attemptMode, delay time.Duration) (held bool, err error) {
	if mode&modeWait != 0 {
		w.n, w.claim, w.queued = w.n+1, claimFor(delay), true
	}
	w.sent = time.Now()
	held, w.retryAfter, err = w.l.attempt(ctx, w.lk, mode, w.claim, w.n)
	if err != nil {
		w.n++
		if nr := (*noReplyError)(nil); errors.As(err, &nr) {
			w.settling = nr.settled
		}
	}
	return held, err
}

// Attempt is the wait loop's attempt: one that joins the queue.
func (w *waiter) Attempt(ctx context.Context, delay time.Duration) rediswait.Outcome {
	held, err := w.attempt(ctx, w.queue, delay)
	if err != nil && ctx.Err() == nil && transient(err) {
		w.l.log.DebugContext(ctx, "attempt failed, waiting on", "key", w.lk.Key(), "error", err)
	}
	// A failed attempt gave back what it may have taken, and left the
	// queue: nothing is left to leave when the error ends the wait.
	return rediswait.Outcome{Held: held, Err: err, Fatal: err != nil && !transient(err), Sleep: w.sleep(delay), RetryAfter: w.retryAfter}
}

// sleep is how long the waiter sleeps after an attempt that planned a
// sleep of delay: no longer than the holder's remaining lease.
func (w *waiter) sleep(delay time.Duration) time.Duration {
	if w.retryAfter > 0 && w.retryAfter < delay {
		return w.retryAfter
	}
	return delay
}

// Woken takes a wake-up: a grant to the waiter's last attempt hands it the
// lock; any other wake-up has it attempt again at once.
func (w *waiter) Woken(ctx context.Context, g rediswait.Wake) rediswait.Outcome {
	handoff := w.settling == nil && w.l.granted(w.lk, g, w.n, w.sent, w.claim, w.o)
	w.l.tables.Locks.Woken(w.lk, handoff)
	return rediswait.Outcome{Held: handoff, Again: true}
}

// Settling is closed once the request the waiter stopped waiting for
// ended (see the settling field); nil when none is pending.
func (w *waiter) Settling() <-chan struct{} {
	if w.settling != nil {
		select {
		case <-w.settling:
			w.settling = nil
		default:
		}
	}
	return w.settling
}

// busy is the error of a wait that ended without the lock.
func (w *waiter) busy(cause error) error {
	return &dlock.NotAcquiredError{Key: w.lk.Key(), RetryAfter: w.retryAfter, Err: cause}
}

// Leave ends the wait without the lock: it leaves the queue, if it joined
// and no request it stopped waiting for will (see settling). The
// give-back is waited for no longer than giveBackTimeout, nor past the
// wait's limit plus RequestTimeout; it goes on meanwhile.
func (w *waiter) Leave(ctx context.Context) {
	if w.queued && w.Settling() == nil {
		by := time.Now().Add(giveBackTimeout)
		if !w.end.IsZero() && w.end.Add(w.lk.requestTimeout()).Before(by) {
			by = w.end.Add(w.lk.requestTimeout())
		}
		w.l.giveBack(ctx, w.lk, by)
	}
}

// transient reports whether an attempt's error may pass by itself: a reply
// that never came (a connection reset or refused, a read timeout), or a
// refusal that a failover or a slot migration explains, or a write that
// too few replicas acknowledged (see WithReplicaAck). A waiting Lock
// rides these out within its wait; any other error ends it at once.
func transient(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, ErrNotReplicated) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "READONLY", "LOADING", "MASTERDOWN", "MOVED", "ASK"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// granted reports whether the wake-up g hands the lock to lk for good: it
// names the waiter's last attempt n, which was sent at sent with claim. The
// grant then lasts until sent+claim at least, and the watchdog extends it
// to the TTL a third of the way into it, so the waiter returns without a
// round trip of its own. A grant to an older attempt (it may have lapsed),
// one that is too close to its end, one for a lock without watchdog, or
// one that replicas must acknowledge is confirmed by the next attempt
// instead, at once.
func (l *Locker) granted(lk *hold, g rediswait.Wake, n int64, sent time.Time, claim time.Duration, o dlock.Options) bool {
	if g.Attempt != n || !o.AutoRenew || lk.ack.n > 0 {
		return false
	}
	deadline := redisnode.Drift.Deadline(sent, claim)
	if time.Until(deadline) < claim/2 {
		return false
	}
	lk.SetFence(g.Fence)
	lk.deadline = deadline
	return true
}

// channel is where the release that grants lk to one of this Locker's
// waiters says so.
func (l *Locker) channel(lk *hold) string { return lk.keys.Queue + ":" + l.sub }

// claimFor is how long a queue entry stays valid after an attempt followed
// by a sleep of at most delay: a waiter that stops coming back (a crash)
// loses its place, and a grant made to it lapses, after that long.
func claimFor(delay time.Duration) time.Duration { return 2*delay + 250*time.Millisecond }
