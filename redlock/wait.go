package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
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
	// claims are the claim windows that the busy nodes stretched (by
	// node; the others' is claim, or longer).
	claims map[int]time.Duration
}

// claimOn is the claim window of the attempt's entry on node i, or a
// lower bound of it.
func (r attemptRecord) claimOn(i int) time.Duration {
	if c, ok := r.claims[i]; ok {
		return c
	}
	return r.claim
}

func (l *Locker) wait(ctx context.Context, lk *hold, o dlock.Options) error {
	begin := time.Now()                // the wait limit counts from here
	single := o.Waiting && o.Wait == 0 // WithWait(0): one attempt, like TryLock
	res := result{busy: true}
	if single || !o.Notify || !l.notify.Ready(l.channel(lk)) {
		// Unless the Locker is subscribed already (a hot key, whose first
		// attempt may join the queue at once), a plain attempt first.
		res = l.attempt(ctx, lk, nil)
		switch {
		case res.err == nil:
			return l.acquired(ctx, lk)
		case ctx.Err() != nil:
			return &dlock.NotAcquiredError{Key: lk.Key(), Err: ctx.Err()}
		case single || !res.busy && !errors.Is(res.err, ErrNoQuorum):
			return res.err
		}
	}
	lk.table().Waiting(lk)
	line := rediswait.Line{Key: lk.Key(), Retry: o.Retry, Quit: l.quit, RetryAfter: res.retryAfter}
	if !res.busy {
		line.Failed = res.err
	}
	w := l.waiters.Get().(*waiter)
	defer l.waiters.Put(w) // nothing holds it once its wait returned
	w.reset(l, lk, o.AutoRenew)
	if o.Waiting {
		line.End = begin.Add(o.Wait)
		w.end = line.End
	}
	if o.Notify {
		by := time.Now().Add(max(2*l.timeout, 100*time.Millisecond))
		if !line.End.IsZero() && line.End.Before(by) {
			by = line.End
		}
		var unwatch func()
		line.Wake, unwatch = l.notify.Watch(ctx, l.channel(lk), lk.Token(), by, nil)
		defer unwatch()
		w.place = queueing{score: time.Now().UnixMicro()}
		w.q = &w.place
	}
	if err := line.Wait(ctx, w); err != nil {
		return err
	}
	return l.acquired(ctx, lk)
}

// waiter is the state of one waiting Lock call past its first attempt:
// its place in the queues (nil when it polls), its attempts and the
// grants the nodes made to them. The wait loop is rediswait's.
type waiter struct {
	l         *Locker
	lk        *hold
	autoRenew bool          // the watchdog renews the lock (dlock.WithAutoRenew)
	end       time.Time     // the wait's limit; zero: none
	timeout   time.Duration // the per-node timeout
	q         *queueing     // &place when it queues, else nil
	place     queueing
	records   map[int64]attemptRecord
	grants    map[int]rediswait.Wake // by node: the latest grant heard of
	fallbacks int
	// last is the round of the last attempt that queued: the nodes that
	// answered it are alive, and a release of the lock that the grants
	// hand over waits for them (see Locker.release).
	last *round
}

// reset makes w the state of a new wait of lk (a waiter is reused from
// its Locker's pool, its maps kept).
func (w *waiter) reset(l *Locker, lk *hold, autoRenew bool) {
	records, grants := w.records, w.grants
	if records == nil {
		records, grants = map[int64]attemptRecord{}, map[int]rediswait.Wake{}
	}
	clear(records)
	clear(grants)
	*w = waiter{l: l, lk: lk, autoRenew: autoRenew, timeout: l.nodeTimeout(lk.ttl), records: records, grants: grants}
}

// Attempt is the wait loop's attempt on every node. A queued waiter's
// fallback sleeps double while the lock stays busy, up to 8 times the
// delay or a second: the release wakes it.
func (w *waiter) Attempt(ctx context.Context, delay time.Duration) rediswait.Outcome {
	base := delay
	if w.q != nil {
		delay = min(delay<<min(w.fallbacks, 3), max(delay, time.Second))
		w.q.attempt++
		w.q.claim = 2*delay + 250*time.Millisecond
		w.q.maxStretch, w.q.step = rediswait.MaxStretch(base, w.lk.ttl), 2*base
		w.records[w.q.attempt] = attemptRecord{sent: time.Now(), claim: w.q.claim}
	}
	w.fallbacks++
	res := w.l.attempt(ctx, w.lk, w.q)
	if res.err == nil {
		return rediswait.Outcome{Held: true}
	}
	if w.q != nil && res.busy && res.round != nil {
		w.last = res.round
	}
	if w.q != nil && res.busy {
		// The busy nodes stretched the entry by the waiter's place there:
		// it sleeps as the one nearest the head allows.
		r := w.records[w.q.attempt]
		var k int64
		told := 0
		for i, s := range res.stretch {
			if s > 1 {
				if r.claims == nil {
					r.claims = map[int]time.Duration{}
				}
				r.claims[i] = w.q.claim + time.Duration(s-1)*w.q.step
			}
			if s > 0 {
				told++
				if k == 0 || s < k {
					k = s
				}
			}
		}
		w.records[w.q.attempt] = r
		if told >= w.l.quorum { // a majority keeps the entry through the sleep
			delay = max(delay, time.Duration(k)*base)
		}
	}
	// The attempt gave back every node it found ours, the ones granted
	// to the waiter included: those grants are void.
	clear(w.grants)
	if res.busy {
		if w.q == nil && res.retryAfter > 0 {
			delay = min(delay, res.retryAfter)
		}
		return rediswait.Outcome{Sleep: delay, RetryAfter: res.retryAfter}
	}
	return w.failed(ctx, rediswait.Outcome{Err: res.err, Sleep: delay})
}

// Woken takes a node's grant: only a majority's hands the lock over.
func (w *waiter) Woken(ctx context.Context, g rediswait.Wake) rediswait.Outcome {
	w.grants[g.Node] = g
	if w.l.heldByGrants(w.lk, w.grants, w.records, w.autoRenew) {
		w.lk.table().Woken(w.lk, true)
		err := w.l.fenceGrants(ctx, w.lk, w.grants, w.records, w.last)
		if err == nil {
			return rediswait.Outcome{Held: true}
		}
		if errors.Is(err, ErrNoQuorum) {
			// A node took its grant back before the fence reached it:
			// no majority after all. Give back what the grants hold,
			// staying queued, and wait on.
			w.l.giveBack(ctx, w.lk, w.l.nodes, w.q)
			clear(w.grants)
		}
		return w.failed(ctx, rediswait.Outcome{Err: err})
	}
	// A lease without watchdog: confirm it by an attempt.
	return rediswait.Outcome{Again: len(w.grants) >= w.l.quorum && !w.autoRenew}
}

// failed completes the outcome of a failure: only ErrNoQuorum may pass
// by itself; a failure that ends the wait leaves the queues.
func (w *waiter) failed(ctx context.Context, out rediswait.Outcome) rediswait.Outcome {
	out.Fatal = !errors.Is(out.Err, ErrNoQuorum)
	if out.Fatal || ctx.Err() != nil {
		w.Leave(ctx)
	}
	return out
}

// Settling is nil: a Redlock attempt ends, on every node, before the next.
func (w *waiter) Settling() <-chan struct{} { return nil }

// Leave takes the waiter out of every queue and gives back any grant:
// waited for at most the per-node timeout, and not past the wait's limit
// plus it; the give-back goes on in the background (Close waits for it),
// and no later request of this waiter can overtake it.
func (w *waiter) Leave(ctx context.Context) {
	if w.q == nil {
		return
	}
	by := time.Now().Add(w.timeout)
	if !w.end.IsZero() && w.end.Add(w.timeout).Before(by) {
		by = w.end.Add(w.timeout)
	}
	l, lk := w.l, w.lk // w goes back to the pool when the wait returns
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
func (l *Locker) heldByGrants(lk *hold, grants map[int]rediswait.Wake, records map[int64]attemptRecord, autoRenew bool) bool {
	if !autoRenew || len(grants) < l.quorum {
		return false
	}
	type end struct {
		at    time.Time
		claim time.Duration
	}
	ends := make([]end, 0, len(grants))
	for _, g := range grants {
		r, ok := records[g.Attempt]
		if !ok {
			continue
		}
		c := r.claimOn(g.Node)
		ends = append(ends, end{redisnode.Drift.Deadline(r.sent, c), c})
	}
	if len(ends) < l.quorum {
		return false
	}
	slices.SortFunc(ends, func(a, b end) int { return b.at.Compare(a.at) })
	deadline, claim := ends[l.quorum-1].at, ends[l.quorum-1].claim
	if time.Until(deadline) < claim/2 {
		return false // too close to its end: the next attempt confirms it
	}
	lk.deadline = deadline
	return true
}

// fenceGrants sets the fence of a lock handed over by grants, as fence
// does for one taken by an attempt, and makes last, the round of the
// waiter's last attempt, the one whose nodes its release waits for (the
// nodes that granted it, and every other that answered that attempt).
func (l *Locker) fenceGrants(ctx context.Context, lk *hold, grants map[int]rediswait.Wake, records map[int64]attemptRecord, last *round) error {
	fences := make(map[int]uint64, len(grants))
	lk.acquiring = last
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
