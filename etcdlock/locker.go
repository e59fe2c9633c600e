package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// releaseTimeout bounds the cleanup calls made on a detached context: the
// release of an acquisition that arrived after its caller gave up, and the
// releases of Close.
const releaseTimeout = driver.ReleaseTimeout

// maxRaces bounds how often one attempt re-reads the holders after losing a
// race with another writer to the same key's range before it reports the
// lock busy.
const maxRaces = 8

// Locker hands out locks kept in etcd. It implements [dlock.Locker]; create
// it with [New]. Its methods are safe for concurrent use.
type Locker struct {
	cli    *clientv3.Client
	opts   dlock.Options
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the Locker, its leases and holds

	tables driver.Tables[*hold] // this Locker's holds, by kind

	deleting deleting // the keys whose delete is under way (see names.go)

	watchAfter time.Duration // how long a hold lives before it watches its key

	// shared is the session of renewed locks with the default TTL, set
	// under mu and read without it by the calls that find it live.
	shared   atomic.Pointer[lease]
	mu       sync.Mutex
	starting *sessionStart // the start of the session under way, if any
}

var (
	_ dlock.Locker         = (*Locker)(nil)
	_ dlock.Inspector      = (*Locker)(nil)
	_ driver.KindInspector = (*Locker)(nil)
	_ dlock.Semaphore      = (*Locker)(nil)
	_ dlock.RWLocker       = (*Locker)(nil)
)

// New returns a Locker over client. The options become the Locker's
// defaults (see [dlock.Option]); their TTL must be at least one second, and
// a fractional one is rounded up to whole seconds. The Locker does not own
// client: close the client after the Locker.
//
// New returns an error matching [dlock.ErrNilClient] when client is nil,
// [dlock.ErrInvalidTTL] or [dlock.ErrInvalidOption] when an option is out
// of range.
func New(client *clientv3.Client, opts ...dlock.Option) (*Locker, error) {
	if client == nil {
		return nil, dlock.ErrNilClient
	}
	o, err := driver.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if o.TTL, err = wholeSeconds(o.TTL); err != nil {
		return nil, err
	}
	if o.Fair {
		return nil, errNoFair
	}
	if err := driver.Foreign(o); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{cli: client, opts: o, ctx: ctx, cancel: cancel, watchAfter: watchAfter}
	l.tables.Init("etcd", o, (*hold).detach)
	return l, nil
}

var (
	errNoFair = fmt.Errorf("%w: etcdlock has no fair mode (WithFair(true))", dlock.ErrInvalidOption)
)

// wholeSeconds rounds ttl up to whole seconds, the unit of etcd leases, and
// refuses a TTL below one second.
func wholeSeconds(ttl time.Duration) (time.Duration, error) {
	if ttl < time.Second {
		return 0, fmt.Errorf("%w: %v is below 1s; etcd leases are whole seconds", dlock.ErrInvalidTTL, ttl)
	}
	return (ttl + time.Second - 1).Truncate(time.Second), nil
}

// rangeOf is the etcd key range of key's holds: "<prefix>/lock/<key>/",
// where '%' and '/' in key are written %25 and %2F so that no key's range
// holds another's ("a/b" would otherwise live inside "a"'s range).
func (l *Locker) rangeOf(key string) string {
	return l.opts.Prefix + "/lock/" + escape(key) + "/"
}

func escape(key string) string {
	if !strings.ContainsAny(key, "%/") {
		return key
	}
	return escaper.Replace(key)
}

// escaper writes '%' and '/' in a key as %25 and %2F. A Replacer is safe
// for concurrent use and builds its tables on first use: one for the
// package, not one per call.
var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// TryLock makes one attempt to acquire key. See [dlock.Locker.TryLock].
// When etcd does not answer within RequestTimeout, it returns the
// request's error, which does not match ErrNotAcquired.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquire(ctx, key, false, opts)
}

// Lock waits for key until it holds it, ctx ends, the WithWait limit
// passes, the retry strategy gives up, or the session that would hold the
// lock ends (then the error matches ErrNotAcquired and ErrLeaseExpired).
// Every request it makes ends with the wait limit, for its reply may never
// come: Lock returns within the limit, plus at most RequestTimeout to
// withdraw from the queue, also while etcd cannot be reached. A wait that
// ran out returns an error matching ErrNotAcquired, also when etcd did not
// answer in time; when etcd answered the last attempt with an error
// before the wait ran out, Lock returns that error instead (a server that
// refuses is not a busy lock), as the Redis driver does.
// Waiters wait in line, in the order they came, each watching the key
// ahead of it, so that a release wakes the next waiter alone; the retry
// strategy only paces a fallback attempt in case a watch event is missed.
// TryLock, a Lock with a pinned lease (dlock.WithLease) and a Lock with
// dlock.WithNotify(false) take a free lock without waiting in line: the
// last two watch the key's range, or poll at the retry strategy's pace.
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquire(ctx, key, true, opts)
}

// Unlock releases this Locker's most recent hold on key for the owner in
// ctx. When ctx carries no owner, it releases the hold without owner, or
// else the most recent hold made with dlock.WithOwner; a hold whose owner
// came in a context is released only with that owner in ctx. See
// [dlock.Locker.Unlock].
func (l *Locker) Unlock(ctx context.Context, key string) error {
	h, err := l.tables.Locks.Find(ctx, key)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}

// Close releases every lock the Locker holds, revokes its leases, stops
// its goroutines and waits for them, and makes later calls return
// ErrClosed. Waiting Lock calls return at once. Calling Close again returns
// ErrClosed.
func (l *Locker) Close() error {
	// Closed under l.mu, where sharedLease starts the session: a session
	// recorded before is revoked here, and one started meanwhile is
	// revoked by its starter, a goroutine of the Locker.
	l.mu.Lock()
	hs, ok := l.tables.Close()
	if !ok {
		l.mu.Unlock()
		return dlock.ErrClosed
	}
	shared := l.shared.Swap(nil)
	l.mu.Unlock()
	l.cancel()

	err := driver.ReleaseAll(hs, func(ctx context.Context, h *hold) error { return h.release(ctx, driver.ErrReleasedByClose) })
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if shared != nil {
		if e := shared.close(ctx); e != nil && !errors.Is(e, rpctypes.ErrLeaseNotFound) {
			err = errors.Join(err, fmt.Errorf("dlock: revoke the session lease: %w", e))
		}
	}
	l.wg.Wait()
	return err
}

// call is one acquisition: its resolved options and state.
type call struct {
	key, owner    string
	ownerByOption bool // the owner came from dlock.WithOwner, not from ctx
	opts          dlock.Options
	renew         bool
	kind          kind
	limit         int // a semaphore's
}

// waitLimit returns a channel that delivers when c's wait limit passes,
// nil when c does not wait (wait false) or waits without a limit, and the
// function that stops its timer.
func (c call) waitLimit(wait bool) (<-chan time.Time, func() bool) {
	if !wait || !c.opts.Waiting {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(c.opts.Wait)
	return t.C, t.Stop
}

// newCall validates one acquisition of key and resolves its options.
func (l *Locker) newCall(ctx context.Context, key string, opts []dlock.Option) (call, error) {
	if err := driver.CheckKey(key); err != nil {
		return call{}, driver.Wrap("lock", key, err)
	}
	o, err := l.opts.Apply(opts...)
	if err != nil {
		return call{}, driver.Wrap("lock", key, err)
	}
	if o.TTL, err = wholeSeconds(o.TTL); err != nil {
		return call{}, driver.Wrap("lock", key, err)
	}
	if o.Fair {
		return call{}, driver.Wrap("lock", key, errNoFair)
	}
	if err := driver.Foreign(o); err != nil {
		return call{}, driver.Wrap("lock", key, err)
	}
	return call{key: key, owner: o.OwnerIn(ctx), ownerByOption: o.Owner != "", opts: o, renew: o.AutoRenew}, nil
}

// acquire is TryLock (wait false) and Lock.
func (l *Locker) acquire(ctx context.Context, key string, wait bool, opts []dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldLock, key, 0, wait, opts)
}

// take acquires a hold of kind k on key: a lock, a permit of a semaphore
// of the given limit, or a read or write lock. It makes one attempt, or
// (wait) waits as Lock does.
func (l *Locker) take(ctx context.Context, k kind, key string, limit int, wait bool, opts []dlock.Option) (_ dlock.Lock, err error) {
	c, err := l.newCall(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	c.kind, c.limit = k, limit
	h, err := l.newHoldOf(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := driver.Ended(ctx, key); err != nil {
		return nil, err
	}
	if err := h.tbl.Reserve(h, false); err != nil {
		return nil, err
	}
	h.tbl.Begin(ctx, h)
	defer func() {
		if err != nil {
			h.tbl.Remove(h)
			h.tbl.Failed(h, wait, err)
		}
	}()

	if c.opts.Waiting && c.opts.Wait == 0 {
		wait = false
	}
	// Close ends every call in flight but a single attempt on the
	// Locker's session, which is left to its RequestTimeout: Close does
	// not wait for it, it starts no goroutine of the Locker, and a hold it
	// makes after Close is given back (see attempt). So the cycle of
	// TryLock and Unlock registers nothing with the Locker's context,
	// which every call would share.
	var cancel context.CancelCauseFunc
	if wait || !c.renew || c.opts.TTL != l.opts.TTL {
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(l.ctx, func() { cancel(dlock.ErrClosed) })()
		defer func() {
			if err != nil && errors.Is(context.Cause(ctx), dlock.ErrClosed) {
				err = driver.Wrap("lock", key, dlock.ErrClosed)
			}
		}()
	}
	// actx ends with the call's limit (see RequestTimeout): every request
	// made for the call ends with it, for its reply may never come.
	actx := ctx
	if !wait || c.opts.Waiting {
		d, cause := RequestTimeout, errNoAnswer
		if wait {
			d, cause = c.opts.Wait, errWaitOver
		}
		var acancel context.CancelFunc
		actx, acancel = context.WithTimeoutCause(ctx, d, cause)
		defer acancel()
	}
	ls, done, err := l.session(ctx, actx, c, wait, cancel)
	if err != nil {
		return nil, err
	}
	defer func() { done(err == nil) }()
	switch {
	case k == driver.HoldLock && wait && c.renew && c.opts.Notify:
		return l.inLine(ctx, actx, c, h, ls)
	case k == driver.HoldLock:
		return l.attempts(ctx, actx, c, h, ls, wait)
	}
	return l.queue(ctx, actx, c, h, ls, wait)
}

// attempts makes the call's attempts: one, or (wait) as many as its wait
// allows, each after a release the watch reports or the retry delay. Each
// attempt is made with actx, which ends with the call's limit.
func (l *Locker) attempts(ctx, actx context.Context, c call, h *hold, ls *lease, wait bool) (dlock.Lock, error) {
	var (
		watch     clientv3.WatchChan
		retry     = driver.NewBackoff(c.opts.Retry)
		b         busy
		lastErr   error // the error of the last attempt, when it failed
		wctx      context.Context
		stopWatch = func() {}
	)
	defer func() { stopWatch() }()
	limit, stopLimit := c.waitLimit(wait)
	defer stopLimit()
	lsDone := ls.ended()
	// giveUp is the error of a wait that ran out: busy, or the last
	// attempt's error when it could not reach etcd.
	giveUp := func() error {
		if lastErr != nil {
			return driver.Wrap("lock", c.key, lastErr)
		}
		return l.notAcquired(ctx, c, b, nil)
	}
	for {
		held, seen, err := l.attempt(actx, c, h, ls)
		switch {
		case held:
			return h, nil
		case err != nil:
			if e := l.failed(ctx, actx, c, ls, b, err, wait); e != nil {
				return nil, e
			}
			lastErr = err
		default:
			b, lastErr = seen, nil
		}
		if !wait {
			return nil, l.notAcquired(actx, c, b, nil)
		}
		h.tbl.Waiting(h)
		if watch == nil && b.rev > 0 && c.opts.Notify {
			p := l.rangeOf(c.key)
			if wctx == nil { // made once a first attempt found the lock busy
				var cancel context.CancelFunc
				wctx, cancel = context.WithCancel(ctx)
				stopWatch = cancel
			}
			watch = l.cli.Watch(wctx, p, clientv3.WithRange(clientv3.GetPrefixRangeEnd(p)), clientv3.WithRev(b.rev+1), clientv3.WithFilterPut())
		}
		d, ok := retry.Next()
		if !ok {
			return nil, giveUp()
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, l.notAcquired(context.WithoutCancel(ctx), c, b, context.Cause(ctx))
		case <-limit:
			t.Stop()
			return nil, giveUp()
		case <-lsDone:
			t.Stop()
			return nil, &dlock.NotAcquiredError{Key: c.key, Err: ls.err}
		case _, ok := <-watch:
			t.Stop()
			if !ok {
				watch = nil // ended (compaction): watch again from the next read
			} else {
				h.tbl.Woken(h, false)
			}
		case <-t.C:
		}
	}
}

// failed returns the error of a call whose attempt (with actx, on the
// session ls when not nil) failed with err, having seen b; or nil when a
// waiter (wait) rides it out (a leader election, a reconnection) and tries
// again after the retry delay. A single attempt that failed (also because
// its session ended, or etcd did not answer within RequestTimeout) returns
// its error: etcd out of reach is not a busy lock. A waiter whose session
// ended gets ErrNotAcquired and the session's end; one whose wait ran out
// during the attempt gets ErrNotAcquired.
func (l *Locker) failed(ctx, actx context.Context, c call, ls *lease, b busy, err error, wait bool) error {
	switch {
	case ls != nil && ls.lost() && !wait:
		return driver.Wrap("lock", c.key, ls.err)
	case ls != nil && ls.lost():
		return &dlock.NotAcquiredError{Key: c.key, Err: ls.err}
	case ctx.Err() != nil:
		return l.notAcquired(context.WithoutCancel(ctx), c, b, context.Cause(ctx))
	case actx.Err() != nil && wait:
		// The wait ran out while the attempt was under way: as for a
		// busy lock, whose reply may come too late as well.
		l.opts.Logger.DebugContext(ctx, "the wait ran out during an attempt", "key", c.key, "error", err)
		return l.notAcquired(ctx, c, b, nil)
	case !wait:
		return driver.Wrap("lock", c.key, noAnswer(actx, err))
	}
	l.opts.Logger.DebugContext(ctx, "attempt failed, waiting on", "key", c.key, "error", err)
	return nil
}

// busy describes a lock held by someone else, as one attempt saw it.
type busy struct {
	rev   int64              // the revision of the read
	lease clientv3.LeaseID   // the lease of the oldest hold
	holds []*mvccpb.KeyValue // the holds, oldest first, when a waiter in line read them
}

// notAcquired builds the error of a busy lock, asking etcd for the
// holder's remaining lease as the retry-after hint.
func (l *Locker) notAcquired(ctx context.Context, c call, b busy, cause error) error {
	e := &dlock.NotAcquiredError{Key: c.key, Err: cause}
	if b.lease != clientv3.NoLease {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		if r, err := l.cli.TimeToLive(tctx, b.lease); err == nil && r.TTL > 0 {
			e.RetryAfter = time.Duration(r.TTL) * time.Second
		}
		cancel()
	}
	return e
}

// attempt makes one attempt at c.key with lease ls (nil for a pinned lease,
// granted here). It reports whether it acquired, and then makes the
// pending hold h held; else it returns what it saw of the holder.
//
// The holds of a key are the keys of its range (see Prefix), one per
// acquisition, each with its owner id as value and attached to the lease
// of whoever acquired it. The lock is free when the range is empty, and an
// owner may add a hold when every hold in the range is its own. The write
// is a transaction whose condition says the range has not changed since it
// was read, so two writers never both succeed on what they each saw.
func (l *Locker) attempt(ctx context.Context, c call, h *hold, ls *lease) (bool, busy, error) {
	h.tbl.Attempted(h)
	if ls == nil {
		var err error
		if ls, err = newLease(ctx, l.cli, c.opts.TTL, false, &l.wg, nil); err != nil {
			return false, busy{}, fmt.Errorf("grant a lease: %w", err)
		}
	}
	pinnedFail := func() {
		if !ls.renew {
			l.dropLease(ctx, ls)
		}
	}
	p := l.rangeOf(c.key)
	end := clientv3.GetPrefixRangeEnd(p)
	token := l.tokenFor(c, ls, p)
	name := p + token
	put := clientv3.OpPut(name, c.owner, clientv3.WithLease(ls.id))
	get := clientv3.OpGet(p, clientv3.WithRange(end)) // sorted here, when busy
	cond := clientv3.Compare(clientv3.Version(p), "=", 0).WithRange(end)
	var b busy
	for range maxRaces {
		resp, err := l.cli.Txn(ctx).If(cond).Then(put).Else(get).Commit()
		if err != nil {
			if ls.renew {
				l.forget(ctx, name, ls)
			}
			pinnedFail() // a key on a pinned lease goes with it
			return false, busy{}, err
		}
		if resp.Succeeded {
			h.token, h.name, h.rev, h.fence = token, name, resp.Header.Revision, resp.Header.Revision
			h.named = ls
			h.setLease(ls)
			if err := h.tbl.Add(h); err != nil { // closed: give it back
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				l.cli.Delete(rctx, name)
				cancel()
				pinnedFail()
				return false, busy{}, err
			}
			h.attach(ls)
			return true, busy{}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		slices.SortFunc(kvs, byCreate)
		b = busy{rev: resp.Header.Revision}
		if len(kvs) > 0 {
			b.lease = clientv3.LeaseID(kvs[0].Lease)
		}
		if len(kvs) > 0 && (c.owner == "" || slices.ContainsFunc(kvs, func(kv *mvccpb.KeyValue) bool { return string(kv.Value) != c.owner })) {
			pinnedFail()
			return false, b, nil
		}
		// Free, or held by our owner alone: write if nothing changed since.
		cond = clientv3.Compare(clientv3.ModRevision(p), "<", b.rev+1).WithRange(end)
	}
	pinnedFail()
	return false, b, nil
}

// byCreate orders the holds of a key oldest first.
func byCreate(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) }
