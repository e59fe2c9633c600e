package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/rediswait"
)

// Lock waits until it holds key. Waiters queue on every node, in the
// order of the moment each began to wait (the same score on every node),
// and a release on a node hands that node's part of the lock to the first
// live waiter there and wakes it; a waiter holds the lock once a majority
// of the nodes handed it over within its validity, without a round trip
// of its own. So a busy key changes hands at the speed of one release,
// and the nodes agree on the next holder as long as they agree on the
// queue:
//
//  1. one attempt, like TryLock (when the Locker is subscribed to the key
//     already, because it waited on it recently, this attempt joins the
//     queue at once);
//  2. when busy, the Locker subscribes to its channel of the key on every
//     node (one connection per node for all its waiters), then attempts
//     again, joining the queue where the lock is busy: no release between
//     the two can be missed;
//  3. it sleeps until woken, or for a fallback that starts at the retry
//     strategy's delay and doubles (up to 8 times it, or a second) while
//     the lock stays busy, so that a lost message or a crashed holder never
//     strands it and a crowd of waiters does not poll every node; each
//     fallback attempt also renews its place, which lapses 2*delay+250ms
//     after the last attempt;
//  4. an attempt that took a minority of the nodes gives them back at
//     once, staying queued there, so that two waiters cannot hold each
//     other's minorities: the nodes hand them to the first waiter in the
//     common order.
//
// A waiting Lock rides out attempts that too few nodes answered
// (ErrNoQuorum) within its wait. When its wait ends, the error matches
// dlock.ErrNotAcquired, and the last attempt's failure (ErrNoQuorum) too
// when the wait ended on one. With dlock.WithNotify(false) a waiter
// neither subscribes nor queues: it polls at the pace of its retry
// strategy.
//
// A Lock with a wait limit (dlock.WithWait) returns within the limit plus
// the per-node timeout (Config.NodeTimeout), however the nodes fail: no
// attempt begins after the limit, an attempt waits for each node at most
// the per-node timeout, and the waiter's leaving the queues is waited for
// no longer. (An attempt that took a minority of the nodes gives them back
// before the next one, for at most a second; that give-back can add to
// the bound when such an attempt ends past the limit.)
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, o, err := l.prepare(ctx, key, opts, true)
	if err != nil {
		return nil, err
	}
	defer l.table.Leave()
	if err := l.wait(ctx, lk, o); err != nil {
		l.table.Remove(lk)
		l.table.Failed(lk, !(o.Waiting && o.Wait == 0), err)
		return nil, err
	}
	return lk, nil
}

// attemptRecord is what a waiter remembers of one of its queueing
// attempts, to date the grants made to its entry.
type attemptRecord struct {
	sent  time.Time
	claim time.Duration
}

func (l *Locker) wait(ctx context.Context, lk *lock, o driver.Options) error {
	begin := time.Now()                // the wait limit counts from here
	single := o.Waiting && o.Wait == 0 // WithWait(0): one attempt, like TryLock
	if !single && o.Notify && l.notify.Ready(l.channel(lk)) {
		// A hot key: the Locker is subscribed already, so the first
		// attempt may join the queue at once.
		return l.queue(ctx, lk, o, begin, result{busy: true})
	}
	res := l.attempt(ctx, lk, nil)
	switch {
	case res.err == nil:
		return l.acquired(ctx, lk)
	case ctx.Err() != nil:
		return &dlock.NotAcquiredError{Key: lk.Key(), Err: ctx.Err()}
	case single || !res.busy && !errors.Is(res.err, ErrNoQuorum):
		return res.err
	}
	return l.queue(ctx, lk, o, begin, res)
}

// queue is the waiting part of wait, begun at begin, after a first
// attempt with result res that neither took the lock nor ended the wait.
func (l *Locker) queue(ctx context.Context, lk *lock, o driver.Options, begin time.Time, res result) error {
	w := &waiter{l: l, lk: lk, o: o, retryAfter: res.retryAfter, timeout: l.nodeTimeout(lk.ttl),
		records: map[int64]attemptRecord{}, grants: map[int]rediswait.Wake{}}
	if !res.busy {
		w.failed = res.err
	}
	lk.table().Waiting(lk)
	end := time.Now().Add(time.Hour)
	var limit time.Time
	if o.Waiting {
		end = begin.Add(o.Wait)
		limit = end
	}
	w.end = end
	var wake <-chan rediswait.Wake
	if o.Notify {
		var unwatch func()
		by := time.Now().Add(max(2*l.timeout, 100*time.Millisecond))
		if end.Before(by) {
			by = end
		}
		wake, unwatch = l.notify.Watch(ctx, l.channel(lk), lk.token, by, nil)
		defer unwatch()
		w.q = &queueing{score: time.Now().UnixMicro()}
	}
	w.backoff = o.Retry.Start()
	return rediswait.Loop(ctx, w, wake, l.quit, limit, true, 0)
}

// waiter is the state of one waiting Lock call: its attempts, its place
// in the queues, and the grants the nodes made to it.
type waiter struct {
	l  *Locker
	lk *lock
	o  driver.Options

	q          *queueing               // its place in the queues; nil: it polls
	records    map[int64]attemptRecord // its queueing attempts, by number
	grants     map[int]rediswait.Wake  // by node: the latest grant heard of
	backoff    *driver.Backoff         // the delays of its attempts
	fallbacks  int                     // the attempts that found the lock busy
	retryAfter time.Duration           // the holder's remaining lease, as the last attempt saw it
	failed     error                   // the last attempt's failure (ErrNoQuorum), when the wait went on
	timeout    time.Duration           // the per-node timeout
	end        time.Time               // the wait's limit (an hour away when none)
}

// Attempt makes the waiter's next attempt: see rediswait.Waiter.
func (w *waiter) Attempt(ctx context.Context) (time.Duration, bool, error) {
	l, lk := w.l, w.lk
	if w.o.Waiting && !time.Now().Before(w.end) {
		return 0, true, w.Leave(ctx, nil) // no attempt begins after the limit
	}
	delay, ok := w.backoff.Next()
	if !ok {
		return 0, true, w.Leave(ctx, nil)
	}
	if w.q != nil {
		// queued waiters back off: the release wakes them
		delay = min(delay<<min(w.fallbacks, 3), max(delay, time.Second))
		w.q.attempt++
		w.q.claim = 2*delay + 250*time.Millisecond
		w.records[w.q.attempt] = attemptRecord{sent: time.Now(), claim: w.q.claim}
	}
	res := l.attempt(ctx, lk, w.q)
	if res.err != nil {
		// The attempt gave back every node it found ours, the ones
		// granted to the waiter included: those grants are void.
		clear(w.grants)
	}
	w.failed = nil
	switch {
	case res.err == nil:
		return 0, true, l.acquired(ctx, lk)
	case ctx.Err() != nil:
		return 0, true, w.Leave(ctx, ctx.Err())
	case !res.busy && !errors.Is(res.err, ErrNoQuorum):
		w.leave(ctx)
		return 0, true, res.err
	case !res.busy:
		w.failed = res.err
	default:
		w.retryAfter = res.retryAfter
	}
	w.fallbacks++
	if w.q == nil && w.retryAfter > 0 {
		delay = min(delay, w.retryAfter)
	}
	return delay, false, nil
}

// Woken takes a node's grant. A node's grant alone is no wake-up: only a
// majority's hands the lock over.
func (w *waiter) Woken(ctx context.Context, g rediswait.Wake) (done, again bool, err error) {
	l, lk := w.l, w.lk
	w.grants[g.Node] = g
	if l.heldByGrants(lk, w.grants, w.records, w.o) {
		lk.table().Woken(lk, true)
		err := l.fenceGrants(ctx, lk, w.grants, w.records)
		if err == nil {
			return true, false, l.acquired(ctx, lk)
		}
		if !errors.Is(err, ErrNoQuorum) {
			w.leave(ctx)
			return true, false, err
		}
		// A node took its grant back before the fence reached it: no
		// majority after all. Give back what the grants hold, staying
		// queued, and wait on.
		l.giveBack(ctx, lk, l.nodes, w.q)
		clear(w.grants)
		w.failed = err
	}
	// A lease without watchdog: confirm it by an attempt.
	return false, len(w.grants) >= l.quorum && !w.o.AutoRenew, nil
}

// Settling is nil: a waiter's give-backs are waited for.
func (w *waiter) Settling() <-chan struct{} { return nil }

// Leave ends the wait without the lock, for cause: busy, with the last
// attempt's failure (ErrNoQuorum) as its cause when the wait ran out
// (nil cause) on one, so that the error matches both
// dlock.ErrNotAcquired and the failure.
func (w *waiter) Leave(ctx context.Context, cause error) error {
	w.leave(ctx)
	switch {
	case cause == nil:
		cause = w.failed
	case errors.Is(cause, dlock.ErrClosed):
		return &dlock.NotAcquiredError{Key: w.lk.Key(), Err: cause}
	}
	return &dlock.NotAcquiredError{Key: w.lk.Key(), RetryAfter: w.retryAfter, Err: cause}
}

// leave takes the waiter out of every queue, and gives any grant back:
// waited for at most the per-node timeout, and not past the wait's limit
// plus it; the give-back goes on in the background (Close waits for it),
// and no later request of this waiter can overtake it.
func (w *waiter) leave(ctx context.Context) {
	if w.q == nil {
		return
	}
	l, lk := w.l, w.lk
	by := time.Now().Add(w.timeout)
	if w.o.Waiting && w.end.Add(w.timeout).Before(by) {
		by = w.end.Add(w.timeout)
	}
	done := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer close(done)
		l.giveBack(ctx, lk, l.nodes, nil)
	}()
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// heldByGrants reports whether the grants heard of hand lk a majority of
// the nodes for long enough: each grant lasts its entry's claim window
// from the moment the attempt that made the entry was sent, and the lock
// is held until the majority's earliest end, less the drift margin. It
// sets lk.deadline. A lease without watchdog is confirmed by an attempt
// instead, for nothing would extend the grants to its TTL.
func (l *Locker) heldByGrants(lk *lock, grants map[int]rediswait.Wake, records map[int64]attemptRecord, o driver.Options) bool {
	if !o.AutoRenew || len(grants) < l.quorum {
		return false
	}
	ends := make([]time.Time, 0, len(grants))
	var claim time.Duration
	for _, g := range grants {
		r, ok := records[g.Attempt]
		if !ok {
			continue
		}
		ends = append(ends, redisnode.Drift.Deadline(r.sent, r.claim))
		claim = max(claim, r.claim)
	}
	if len(ends) < l.quorum {
		return false
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return b.Compare(a) })
	deadline := ends[l.quorum-1]
	if time.Until(deadline) < claim/2 {
		return false // too close to its end: the next attempt confirms it
	}
	lk.deadline = deadline
	return true
}

// fenceGrants sets the fence of a lock handed over by grants, as fence
// does for one taken by an attempt.
func (l *Locker) fenceGrants(ctx context.Context, lk *lock, grants map[int]rediswait.Wake, records map[int64]attemptRecord) error {
	fences := make(map[int]uint64, len(grants))
	lk.answered = make([]bool, len(l.nodes))
	for i, g := range grants {
		if _, ok := records[g.Attempt]; ok {
			fences[i] = g.Fence
			lk.answered[i] = true
		}
	}
	return l.fence(ctx, lk, fences)
}

// channel is where the releases that hand lk's key to one of this
// Locker's waiters say so.
func (l *Locker) channel(lk *lock) string { return lk.keys.Queue + ":" + l.sub }
