package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// hold is the handle of one acquisition, the dlock.Lock of this driver.
// While it reports held, a majority of the nodes keeps the hold at least
// until its local deadline: the deadline counts from the moment before
// the requests that set the lease were sent, less the drift margin, and a
// majority confirmed them.
type hold struct {
	driver.Hold  // the key, the owner, the state, Done and Err
	driver.Lease // the lease, as the watchdog keeps it
	l            *Locker
	keys         redisnode.Keys
	keyArgs      []any // the keys of the scripts, boxed once
	scripts      *scriptSet
	ttl          time.Duration // the lease asked for
	renew        bool          // the watchdog renews it
	deadline     time.Time     // the local deadline when acquired

	acquiring *round // the attempt that took the lock, whose slowest nodes may still answer
	answered  []bool // by node: it answered the acquisition

	unlockMu sync.Mutex // serialises Unlock
	unknown  bool       // a release was sent whose outcome is unknown; under unlockMu
}

var (
	_ dlock.Lock        = (*hold)(nil)
	_ driver.Lapser     = (*hold)(nil)
	_ driver.Downgrader = (*hold)(nil)
)

func (lk *hold) end(err error) bool { return lk.table().End(lk, err) }

func (lk *hold) lose(cause error) error { return lk.table().Lose(lk, cause) }

// table is the table that lk lives in: the locks', or the read-write
// holds'.
func (lk *hold) table() *driver.Table[*hold] { return lk.l.tables.Of(lk.Kind()) }

// leaseArg is the TTL argument, in ms, of lease.lua's refresh for a lease
// of ms: negative for a hold, which tells refresh to renew a member of a
// read-write lock's set.
func (lk *hold) leaseArg(ms int64) int64 {
	if lk.Kind() != driver.HoldLock {
		return -ms
	}
	return ms
}

// tally counts the replies of a request that each node answers with 1
// (ours, or released), 0 (the hold is gone) or -1 (another party holds the
// lock): release.lua's replies, and refresh.lua's 1 and 0.
type tally struct {
	ours, gone, taken int
	errs              []error
}

func (l *Locker) tally(got []reply) tally {
	var t tally
	for _, r := range got {
		switch {
		case r.skipped:
		case r.err != nil:
			t.errs = append(t.errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
		case r.n > 0:
			t.ours++
		case r.n == 0:
			t.gone++
		default:
			t.taken++
		}
	}
	return t
}

// Unlock releases the lock on every node at once, and returns when every
// node answered or the per-node timeout passed (a node that did not
// answer the acquisition is sent its release, and not waited for). A
// release that finds the hold gone before the local deadline is one that
// was re-sent after its first run, or an expiry of a minority's keys: the
// lock was ours to the end, and Unlock returns nil.
// Once Unlock is called the watchdog no longer renews the lock: a release
// that fails lets the lease lapse at its deadline, when the handle ends as
// released. Unlocking twice returns dlock.ErrNotHeld; unlocking a lost
// lock returns the *dlock.LostError.
func (lk *hold) Unlock(ctx context.Context) error {
	done, err := lk.releasing()
	if err != nil {
		return err
	}
	defer done()
	l := lk.l
	t, err := l.release(ctx, lk)
	if err != nil {
		lk.unknown = true
		return err
	}
	inLease := time.Now().Before(l.watchdog.Deadline(lk))
	switch {
	case inLease, t.ours >= l.quorum:
		lk.end(dlock.ErrNotHeld)
		return nil
	case lk.State() == driver.Released:
		return nil // it lapsed while the release was under way
	}
	return lk.lose(dlock.ErrOwnershipLost)
}

// release sends release.lua to every node and waits for their answers
// (or the per-node timeout), so that a caller that acquires the key again
// at once finds it free on every node that answered, and the Locker's
// next request to a node finds its release answered (not in flight, which
// would take a connection of its own): for a lock taken by an attempt,
// every node that answered the attempt, however late; for one handed over
// by releases, every node that handed it over and every other that
// answered the waiter's last attempt.
func (l *Locker) release(ctx context.Context, lk *hold) (tally, error) {
	now := time.Now().UnixMicro()
	send := func(ctx context.Context, nd *node) reply {
		if rd := lk.acquiring; rd != nil && !lk.answered[nd.i] {
			// A node that had not answered the acquisition must not see
			// the release first, or it would keep the lock until its
			// lease ran out. One that does not answer at all is not
			// waited for: its release goes out in the background.
			if !rd.await(nd.i, l.nodeTimeout(lk.ttl)) {
				l.bg.Add(1)
				go func() {
					defer l.bg.Done()
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.nodeTimeout(lk.ttl))
					defer cancel()
					lk.scripts.release.Run(rctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner(), releasePlain, 0, 0, 0, "", now)
				}()
				return reply{skipped: true}
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.nodeTimeout(lk.ttl))
			defer cancel()
		}
		v, err := lk.scripts.release.Run(ctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner(), releasePlain, 0, 0, 0, "", now).Int64()
		return reply{n: v, err: err}
	}
	enough := func(got []reply) bool {
		if lk.acquiring != nil {
			return false // every node: answered, timed out or skipped
		}
		// Handed over by releases: the nodes that handed it over, and a
		// majority in all.
		answered := 0
		for _, r := range got {
			if r.definite() {
				answered++
			}
		}
		if answered < l.quorum {
			return false
		}
		for i, a := range lk.answered {
			if a && !slices.ContainsFunc(got, func(r reply) bool { return r.node == i }) {
				return false
			}
		}
		return true
	}
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(lk.ttl), send, enough, nil)
	rd.settle(false)
	t := l.tally(got)
	if answered := t.ours + t.gone + t.taken; answered < l.quorum {
		return t, l.noQuorum("unlock", lk.Key(), answered, t.errs)
	}
	return t, nil
}

// releasing begins a release of lk: it takes lk.unlockMu, checks that lk
// is held, counts the release among the Locker's calls in flight and
// stops the renewals (a renewal in flight ends first). Unless it fails,
// the caller calls done when the release ended.
func (lk *hold) releasing() (done func(), err error) {
	lk.unlockMu.Lock()
	if err := lk.Check("unlock"); err != nil {
		lk.unlockMu.Unlock()
		return nil, err
	}
	if !lk.l.calls.enter() {
		lk.unlockMu.Unlock()
		return nil, errClosed("unlock", lk.Key())
	}
	done = func() {
		lk.l.calls.leave()
		lk.unlockMu.Unlock()
	}
	if err := lk.l.watchdog.Releasing(lk); err != nil {
		err = lk.lose(err)
		done()
		return nil, err
	}
	return done, nil
}

// closeRelease is Close's release of lk: it ends the handle first, so
// that the work it guards is told to stop before another party can take
// the key, and then releases it everywhere.
func (lk *hold) closeRelease(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if lk.State() != driver.Held {
		return nil
	}
	lk.end(driver.ErrReleasedByClose)
	_, err := lk.l.release(ctx, lk)
	return err
}

// Refresh sets the remaining lease to ttl on every node at once (for an
// owner's lock: extends the shared lease to at least ttl), and makes ttl
// the lease the watchdog renews from now on. It succeeds when a majority
// confirmed; when a majority no longer has the hold, the lock is lost.
func (lk *hold) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl < dlock.MinTTL {
		return lk.Wrap("refresh", fmt.Errorf("%w: %v is below %v", dlock.ErrInvalidTTL, ttl, dlock.MinTTL))
	}
	if err := lk.Check("refresh"); err != nil {
		return err
	}
	l := lk.l
	if !l.calls.enter() {
		return errClosed("refresh", lk.Key())
	}
	defer l.calls.leave()
	send := func(ctx context.Context, nd *node) reply {
		v, err := refreshScript.Run(ctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner(), lk.leaseArg(ttl.Milliseconds())).Int64()
		return reply{n: v, err: err}
	}
	sent := time.Now()
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(ttl), send, l.decided, nil)
	rd.settle(false)
	t := l.tally(got)
	switch {
	case t.ours >= l.quorum:
		l.watchdog.Refreshed(lk, sent, ttl, true)
		return nil
	case t.gone+t.taken > len(l.nodes)-l.quorum:
		return lk.lose(dlock.ErrOwnershipLost)
	}
	// Some nodes may have applied it: the lease is the shorter of the two.
	l.watchdog.Refreshed(lk, sent, ttl, false)
	return l.noQuorum("refresh", lk.Key(), t.ours+t.gone+t.taken, t.errs)
}

// decided says whether the replies of a request answered 1 (ours) or
// not decide it: a majority said ours, or too many said not.
func (l *Locker) decided(got []reply) bool {
	t := l.tally(got)
	return t.ours >= l.quorum || t.gone+t.taken > len(l.nodes)-l.quorum
}

// TTL returns the remaining lease as the majority sees it: the time until
// fewer than a majority of the nodes would still keep the lock.
func (lk *hold) TTL(ctx context.Context) (time.Duration, error) {
	if err := lk.Check("ttl"); err != nil {
		return 0, err
	}
	l := lk.l
	if !l.calls.enter() {
		return 0, errClosed("ttl", lk.Key())
	}
	defer l.calls.leave()
	send := func(ctx context.Context, nd *node) reply {
		v, err := lk.scripts.ttl.Run(ctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner()).Int64()
		return reply{n: v, err: err}
	}
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(lk.ttl), send, nil, nil)
	rd.settle(false)
	var ttls []int64
	notOurs := 0
	var errs []error
	for _, r := range got {
		switch {
		case r.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
		case r.n >= 0:
			ttls = append(ttls, r.n)
		default:
			notOurs++
		}
	}
	if len(ttls) >= l.quorum {
		slices.Sort(ttls)
		return time.Duration(ttls[len(ttls)-l.quorum]) * time.Millisecond, nil
	}
	if notOurs > len(l.nodes)-l.quorum {
		return 0, lk.lose(dlock.ErrOwnershipLost)
	}
	return 0, l.noQuorum("ttl", lk.Key(), len(ttls)+notOurs, errs)
}

// renew is the watchdog's renewal of a batch, of locks and read-write
// holds alike: one renew.lua call per node, to every node at once. A lock is renewed when a majority confirmed it,
// and lost when so many nodes no longer have it that no majority can.
func (l *Locker) renew(ctx context.Context, batch []driver.Renewal[*hold]) []error {
	keys := make([]any, 0, 2*len(batch))
	argv := make([]any, 0, 3*len(batch))
	for _, r := range batch {
		keys = append(keys, r.Lock.keys.Lock, r.Lock.keys.Holds)
		argv = append(argv, r.Lock.Token(), r.Lock.Owner(), r.Lock.leaseArg(r.TTL.Milliseconds()))
	}
	send := func(ctx context.Context, nd *node) reply {
		s, err := renewScript.Run(ctx, nd.send, keys, argv...).Text()
		s, err = redisnode.RenewCodes(s, err, len(batch))
		return reply{s: s, err: err}
	}
	n := len(l.nodes)
	count := func(got []reply, i int) (ours, not int) {
		for _, r := range got {
			if r.err == nil {
				if r.s[i] == '1' {
					ours++
				} else {
					not++
				}
			}
		}
		return ours, not
	}
	enough := func(got []reply) bool {
		for i := range batch {
			if ours, not := count(got, i); ours < l.quorum && not <= n-l.quorum {
				return false
			}
		}
		return true
	}
	timeout := l.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	got, rd := l.fanout(ctx, l.nodes, timeout, send, enough, nil)
	rd.settle(false)
	var errs []error
	for _, r := range got {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
		}
	}
	out := make([]error, len(batch))
	for i := range batch {
		ours, not := count(got, i)
		switch {
		case ours >= l.quorum:
		case not > n-l.quorum:
			out[i] = fmt.Errorf("%w: %d of %d nodes no longer hold it", dlock.ErrOwnershipLost, not, n)
		default:
			out[i] = fmt.Errorf("%w: %d of %d nodes confirmed, %d needed: %w", ErrNoQuorum, ours, n, l.quorum, errorsJoin(errs))
		}
	}
	return out
}
