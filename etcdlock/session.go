package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// sessionStart is the start of the Locker's session: the calls that need
// the session while it starts wait for it, each within its own limit.
type sessionStart struct {
	done chan struct{} // closed when ls and err are set
	ls   *lease
	err  error
}

// sharedLease returns the session shared by renewed locks with the
// Locker's TTL, starting a new one when there is none or it ended. The
// Locker starts it, on a goroutine of its own and within RequestTimeout,
// so that no caller's limit cuts the start short for the others: each
// caller waits for it until its ctx ends, and a caller with time left
// starts it again after a start that etcd did not answer.
func (l *Locker) sharedLease(ctx context.Context) (*lease, error) {
	// The live session is found without l.mu, which every call would
	// share: a call that takes it as Close begins gives back what it
	// acquires, as any call that Close overtakes does (see Table.Add).
	if ls := l.shared.Load(); ls != nil && !ls.lost() && !l.tables.Locks.Closed() {
		return ls, nil
	}
	for {
		l.mu.Lock()
		if l.tables.Locks.Closed() {
			l.mu.Unlock()
			return nil, dlock.ErrClosed
		}
		if ls := l.shared.Load(); ls != nil && !ls.lost() {
			l.mu.Unlock()
			return ls, nil
		}
		st := l.starting
		if st == nil {
			st = &sessionStart{done: make(chan struct{})}
			l.starting = st
			l.wg.Go(func() { l.startSession(st) }) // before Close marks the table closed
		}
		l.mu.Unlock()
		select {
		case <-st.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if st.err != nil && !errors.Is(st.err, errNoAnswer) {
			return nil, st.err
		}
	}
}

// startSession grants the Locker's session for st, and records it unless
// the Locker closed meanwhile (then it revokes it). Close ends the grant.
func (l *Locker) startSession(st *sessionStart) {
	defer close(st.done)
	ctx, cancel := context.WithTimeoutCause(l.ctx, RequestTimeout, errNoAnswer)
	defer cancel()
	ls, err := newLease(ctx, l.cli, l.opts.TTL, true, &l.wg, l.onRenew())
	l.mu.Lock()
	l.starting = nil
	closed := l.tables.Locks.Closed()
	if err == nil && !closed {
		ls.shared = true
		l.shared.Store(ls)
		context.AfterFunc(ls.ctx, func() { l.sessionEnded(ls) })
	}
	l.mu.Unlock()
	switch {
	case err != nil:
		st.err = noAnswer(ctx, err)
	case closed:
		rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
		ls.close(rctx)
		rcancel()
		st.err = dlock.ErrClosed
	default:
		st.ls = ls
	}
}

// session returns the lease a renewed lock is written with, started before
// the first attempt; a pinned lease is granted at each attempt instead,
// since its time runs from the grant (ls is then nil). A permit or a read
// or write lock with a pinned lease that waits queues on the Locker's
// session, and moves to a pinned lease when it is admitted (see queue).
// The call's context is cancelled (cancel) when the session ends: a
// waiter whose session ended must not wait on (etcd-io/etcd#19597); a
// single attempt on the Locker's session (cancel nil) is not, for its
// write on a lease that ended fails, and a hold it made ends with the
// lease (see attach). The
// session is started within the call's limit (actx). The caller calls
// done when the call returns, saying whether it acquired; a session of
// the call's own is revoked when it did not.
func (l *Locker) session(ctx, actx context.Context, c call, wait bool, cancel context.CancelCauseFunc) (ls *lease, done func(acquired bool), err error) {
	if !c.renew && (c.kind == driver.HoldLock || !wait) {
		return nil, func(bool) {}, nil
	}
	if c.opts.TTL == l.opts.TTL || !c.renew {
		ls, err = l.sharedLease(actx)
	} else {
		ls, err = newLease(actx, l.cli, c.opts.TTL, true, &l.wg, l.onRenew())
	}
	switch {
	case err == nil:
	case errors.Is(err, dlock.ErrClosed):
		return nil, nil, driver.Wrap("lock", c.key, fmt.Errorf("start a session: %w", err))
	case ctx.Err() != nil && wait:
		// A waiting call whose context ended: as when it ends during the
		// wait (dlock.Locker.Lock).
		return nil, nil, &dlock.NotAcquiredError{Key: c.key, Err: context.Cause(ctx)}
	case actx.Err() != nil && wait:
		l.opts.Logger.DebugContext(ctx, "the wait ran out before the session started", "key", c.key, "error", err)
		return nil, nil, &dlock.NotAcquiredError{Key: c.key}
	default:
		return nil, nil, driver.Wrap("lock", c.key, fmt.Errorf("start a session: %w", noAnswer(actx, err)))
	}
	if cancel == nil && ls.shared {
		return ls, func(bool) {}, nil // nothing to undo
	}
	stop := func() bool { return false }
	if cancel != nil {
		stop = context.AfterFunc(ls.ctx, func() { cancel(context.Cause(ls.ctx)) })
	}
	return ls, func(acquired bool) {
		stop()
		if !acquired && !ls.shared {
			l.dropLease(actx, ls)
		}
	}, nil
}

// dropLease ends ls, a lease of the call's own that no hold keeps, and
// revokes it: with actx, the context of the call's requests, while the
// call has time; in the background when it has none or etcd did not
// answer (a lease nothing keeps alive lapses within its TTL anyway).
func (l *Locker) dropLease(actx context.Context, ls *lease) {
	if actx.Err() == nil {
		rctx, cancel := context.WithTimeout(actx, releaseTimeout)
		err := ls.close(rctx)
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return
		}
	}
	ls.lose(errLeaseClosed)
	l.revokeLater(ls)
}
