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
// the per-node timeout (WithNodeTimeout), however the nodes fail: no
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
	defer l.tables.Locks.Leave()
	if err := l.wait(ctx, lk, o); err != nil {
		l.tables.Locks.Remove(lk)
		l.tables.Locks.Failed(lk, !(o.Waiting && o.Wait == 0), err)
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

func (l *Locker) wait(ctx context.Context, lk *hold, o dlock.Options) error {
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
func (l *Locker) queue(ctx context.Context, lk *hold, o dlock.Options, begin time.Time, res result) error {
	failed := res.err
	if res.busy {
		failed = nil
	}
	lk.table().Waiting(lk)
	var limit <-chan time.Time
	end := time.Now().Add(time.Hour)
	if o.Waiting {
		end = begin.Add(o.Wait)
		t := time.NewTimer(time.Until(end))
		defer t.Stop()
		limit = t.C
	}
	notify := o.Notify
	var (
		wake    <-chan rediswait.Wake
		q       *queueing
		records = map[int64]attemptRecord{}
		grants  = map[int]rediswait.Wake{} // by node: the latest grant heard of
	)
	if notify {
		var unwatch func()
		by := time.Now().Add(max(2*l.timeout, 100*time.Millisecond))
		if end.Before(by) {
			by = end
		}
		wake, unwatch = l.notify.Watch(ctx, l.channel(lk), lk.Token(), by, nil)
		defer unwatch()
		q = &queueing{score: time.Now().UnixMicro()}
	}
	timeout := l.nodeTimeout(lk.ttl)
	leave := func() {
		if q == nil {
			return
		}
		// Out of every queue, and any grant given back: waited for at
		// most the per-node timeout, and not past the wait's limit plus
		// it; the give-back goes on in the background (Close waits for
		// it), and no later request of this waiter can overtake it.
		by := time.Now().Add(timeout)
		if o.Waiting && end.Add(timeout).Before(by) {
			by = end.Add(timeout)
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
	backoff := driver.NewBackoff(o.Retry)
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	fallbacks := 0
	retryAfter := res.retryAfter
	// giveUp ends a wait that ran out: busy, or, when the last attempt
	// failed, that failure (ErrNoQuorum) as the cause of a busy error, so
	// that the error matches both dlock.ErrNotAcquired and the failure.
	giveUp := func() error {
		leave()
		return &dlock.NotAcquiredError{Key: lk.Key(), RetryAfter: retryAfter, Err: failed}
	}
	for {
		if o.Waiting && !time.Now().Before(end) {
			return giveUp() // no attempt begins after the limit
		}
		delay, ok := backoff.Next()
		if !ok {
			return giveUp()
		}
		if q != nil {
			// queued waiters back off: the release wakes them
			delay = min(delay<<min(fallbacks, 3), max(delay, time.Second))
			q.attempt++
			q.claim = 2*delay + 250*time.Millisecond
			records[q.attempt] = attemptRecord{sent: time.Now(), claim: q.claim}
		}
		res := l.attempt(ctx, lk, q)
		if res.err != nil {
			// The attempt gave back every node it found ours, the ones
			// granted to the waiter included: those grants are void.
			clear(grants)
		}
		failed = nil
		switch {
		case res.err == nil:
			return l.acquired(ctx, lk)
		case ctx.Err() != nil:
			leave()
			return &dlock.NotAcquiredError{Key: lk.Key(), Err: ctx.Err(), RetryAfter: retryAfter}
		case !res.busy && !errors.Is(res.err, ErrNoQuorum):
			leave()
			return res.err
		case !res.busy:
			failed = res.err
		default:
			retryAfter = res.retryAfter
		}
		fallbacks++
		if q == nil && retryAfter > 0 {
			delay = min(delay, retryAfter)
		}
		sleep.Reset(delay)
	sleeping:
		for {
			select {
			case g := <-wake:
				grants[g.Node] = g
				// A node's grant alone is no wake-up: only a majority's
				// hands the lock over.
				if l.heldByGrants(lk, grants, records, o) {
					lk.table().Woken(lk, true)
					err := l.fenceGrants(ctx, lk, grants, records)
					if err == nil {
						return l.acquired(ctx, lk)
					}
					if !errors.Is(err, ErrNoQuorum) {
						leave()
						return err
					}
					// A node took its grant back before the fence reached
					// it: no majority after all. Give back what the grants
					// hold, staying queued, and wait on.
					l.giveBack(ctx, lk, l.nodes, q)
					clear(grants)
					failed = err
				}
				if len(grants) >= l.quorum && !o.AutoRenew {
					break sleeping // a lease without watchdog: confirm it by an attempt
				}
			case <-sleep.C:
				break sleeping
			case <-limit:
				return giveUp()
			case <-ctx.Done():
				leave()
				return &dlock.NotAcquiredError{Key: lk.Key(), Err: ctx.Err(), RetryAfter: retryAfter}
			case <-l.quit:
				leave()
				return &dlock.NotAcquiredError{Key: lk.Key(), Err: dlock.ErrClosed}
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

// heldByGrants reports whether the grants heard of hand lk a majority of
// the nodes for long enough: each grant lasts its entry's claim window
// from the moment the attempt that made the entry was sent, and the lock
// is held until the majority's earliest end, less the drift margin. It
// sets lk.deadline. A lease without watchdog is confirmed by an attempt
// instead, for nothing would extend the grants to its TTL.
func (l *Locker) heldByGrants(lk *hold, grants map[int]rediswait.Wake, records map[int64]attemptRecord, o dlock.Options) bool {
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
func (l *Locker) fenceGrants(ctx context.Context, lk *hold, grants map[int]rediswait.Wake, records map[int64]attemptRecord) error {
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
func (l *Locker) channel(lk *hold) string { return lk.keys.Queue + ":" + l.sub }
