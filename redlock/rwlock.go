package redlock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// The read-write lock of a key lives on every node beside the key's lock,
// under "<prefix>:rw:<key>" and companions, in the layout and under the
// rules of the Redis driver's (package redisnode's shared.lua): each node
// keeps the read and write holds of the key, each a lease of its own, and
// grants a hold when it fits there (readers overlap; a writer excludes
// everyone else; a waiting writer holds new readers back). A hold is held
// when a majority of the nodes granted it within its validity, as a lock
// is: any two majorities share a node, and no node grants a write hold
// beside another hold, so a writer and a reader, or two writers, never
// both hold a majority.
//
// A hold is the driver's lock handle with a kind, in a table of its own:
// it is acquired, waited for, renewed, released, fenced and lapsed by the
// lock's code, with the hold's scripts (see scriptSet). Its fences come
// from one counter per key for readers and writers, by the lock's rule
// (see fence): a hold's fence is above the fence of every hold that ended
// before it began, so a write lock's fence grows.

// TryRLock makes one attempt to take the read lock of key, on every node
// at once (see dlock.RWLocker): it succeeds when a majority granted it
// within its validity, which a node does unless another owner holds the
// write lock there or, for a newcomer, a writer waits there.
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldRead, key, opts, false)
}

// RLock waits until it holds the read lock of key, as Lock waits: in the
// queue of every node, in the order of the moment each waiter began to
// wait.
func (l *Locker) RLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldRead, key, opts, true)
}

// TryWLock makes one attempt to take the write lock of key: it succeeds
// when a majority of the nodes granted it, which a node does when nobody
// else holds the key's read or write lock there. An owner that holds the
// read lock gets an error matching dlock.ErrUpgrade, and so does a Locker
// that holds it without owner.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldWrite, key, opts, false)
}

// WLock waits until it holds the write lock of key, as Lock waits. A
// waiting writer always queues (dlock.WithNotify(false) does not apply to
// it), so that new readers wait behind it. The handle is a
// driver.Downgrader.
func (l *Locker) WLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldWrite, key, opts, true)
}

// RUnlock releases this Locker's most recent read lock of key for the
// owner in ctx, in the manner of Unlock. It returns an error matching
// dlock.ErrNotHeld when there is none.
func (l *Locker) RUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, true)
}

// WUnlock releases this Locker's most recent write lock of key for the
// owner in ctx, in the manner of Unlock.
func (l *Locker) WUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, false)
}

// prepareHold validates a call for a hold of kind k and reserves its
// place in the table of read-write holds. A waiting call (wait) must call
// l.tables.RW.Leave when it returns, if prepareHold did not fail.
func (l *Locker) prepareHold(ctx context.Context, k driver.HoldKind, key string, opts []dlock.Option, wait bool) (*hold, dlock.Options, error) {
	if l.tables.RW.Closed() {
		return nil, dlock.Options{}, driver.Wrap("lock", key, dlock.ErrClosed)
	}
	o, err := l.opts.Apply(opts...)
	if err != nil {
		return nil, o, driver.Wrap("lock", key, err)
	}
	keys, err := redisnode.In(o.Prefix, ":rw:", key)
	if err != nil {
		return nil, o, driver.Wrap("lock", key, err)
	}
	if err := driver.Ended(ctx, key); err != nil {
		return nil, o, err
	}
	owner := o.OwnerIn(ctx)
	lk := &hold{l: l, keys: keys, keyArgs: keys.Args(), scripts: rwScripts,
		ttl: o.TTL, renew: o.AutoRenew}
	lk.Init(k, key, owner, o.Owner != "")
	lk.SetToken(driver.NewToken())
	if k == driver.HoldWrite && owner == "" {
		// This Locker's own read hold would make the writer wait on
		// itself: say so rather than ErrAlreadyHeld.
		if h, err := l.tables.RW.Find(dlock.ContextWithOwner(ctx, ""), key); err == nil && h.Reads() {
			return nil, o, driver.Wrap("lock", key, dlock.ErrUpgrade)
		}
	}
	if err := l.tables.RW.Reserve(lk, wait); err != nil {
		return nil, o, err
	}
	l.tables.RW.Begin(ctx, lk)
	return lk, o, nil
}

// acquireHold takes a hold of kind k: one attempt, or (wait) a wait as
// Lock's.
func (l *Locker) acquireHold(ctx context.Context, k driver.HoldKind, key string, opts []dlock.Option, wait bool) (dlock.Lock, error) {
	lk, o, err := l.prepareHold(ctx, k, key, opts, wait)
	if err != nil {
		return nil, err
	}
	if !wait {
		if !l.calls.enter() {
			l.tables.RW.Remove(lk)
			return nil, errClosed("lock", key)
		}
		defer l.calls.leave()
		res := l.attempt(ctx, lk, nil)
		err := res.err
		if err == nil {
			err = l.acquired(ctx, lk)
		}
		if err != nil {
			l.tables.RW.Remove(lk)
			l.tables.RW.Failed(lk, false, err)
			return nil, err
		}
		return lk, nil
	}
	defer l.tables.RW.Leave()
	if k == driver.HoldWrite {
		// A waiting writer always queues, so that new readers wait
		// behind it.
		o.Notify = true
	}
	if err := l.wait(ctx, lk, o); err != nil {
		l.tables.RW.Remove(lk)
		l.tables.RW.Failed(lk, !(o.Waiting && o.Wait == 0), err)
		return nil, err
	}
	return lk, nil
}

// Downgrade turns a write lock into a read lock on every node at once,
// with the same token, fence and lease (see driver.Downgrader): readers
// queued behind it may enter, unless a writer waits ahead of them. It
// succeeds when a majority of the nodes made the change; when so many no
// longer have the hold that no majority can, the lock is lost. When too
// few answer to decide (an error matching ErrNoQuorum), some nodes may
// have made it: the caller must act as a reader from then on, and may
// call Downgrade again, which finds the read holds it made. On any other
// handle it returns an error matching dlock.ErrInvalidOption.
func (lk *hold) Downgrade(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if err := lk.CheckDowngrade(); err != nil {
		return err
	}
	l := lk.l
	if !l.calls.enter() {
		return errClosed("downgrade", lk.Key())
	}
	defer l.calls.leave()
	send := func(ctx context.Context, nd *node) reply {
		v, err := downgradeScript.Run(ctx, nd.send, lk.keyArgs, lk.Token()).Int64()
		if err == nil && v < 0 {
			v = 1 // a read hold already: an earlier Downgrade whose reply was lost
		}
		return reply{n: v, err: err}
	}
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(lk.ttl), send, l.decided, nil)
	rd.settle(false)
	t := l.tally(got)
	switch {
	case t.ours >= l.quorum:
		lk.Downgraded()
		return nil
	case t.gone+t.taken > len(l.nodes)-l.quorum:
		return lk.lose(dlock.ErrOwnershipLost)
	}
	return l.noQuorum("downgrade", lk.Key(), t.ours+t.gone+t.taken, t.errs)
}
