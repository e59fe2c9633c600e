package postgreslock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// take acquires a hold of kind k on key: a lock, a permit of a semaphore
// of limit, or a read or write lock. It makes one attempt, or (wait)
// waits as Lock does.
func (l *Locker) take(ctx context.Context, k driver.HoldKind, key string, limit int, wait bool, opts []dlock.Option) (_ dlock.Lock, err error) {
	if err := driver.CheckKey(key); err != nil {
		return nil, driver.Wrap("lock", key, err)
	}
	o, err := l.opts.Apply(opts...)
	if err == nil {
		err = checkOptions(o)
	}
	if err != nil {
		return nil, driver.Wrap("lock", key, err)
	}
	if k == driver.HoldPermit && (limit < 1 || limit > dlock.MaxLimit) {
		return nil, driver.Invalid("lock", key, "limit %d is outside 1 to %d", limit, dlock.MaxLimit)
	}
	if err := driver.Ended(ctx, key); err != nil {
		return nil, err
	}
	if o.Waiting && o.Wait == 0 {
		wait = false
	}
	h := &hold{l: l, tbl: l.tables.Of(k), name: l.nameOf(k, key), owner: o.OwnerIn(ctx)}
	if k == driver.HoldPermit && h.owner == "" {
		// A Locker may hold many permits of a key: each is a holder of
		// its own in the table, found by Release as a WithOwner hold is.
		h.Init(k, key, driver.NewToken(), true)
	} else {
		h.Init(k, key, h.owner, o.Owner != "")
	}
	if err := h.tbl.Reserve(h, wait); err != nil {
		return nil, err
	}
	if wait {
		defer h.tbl.Leave()
	}
	h.tbl.Begin(ctx, h)
	defer func() {
		if err != nil {
			h.tbl.Remove(h)
			h.tbl.Failed(h, wait, err)
		}
	}()
	if !wait && ctx.Done() == nil {
		// ctx never ends: the statement runs on a bound that attempts
		// share, which Close ends too (see bounds).
		r := l.tries.request(ctx)
		busy, err := l.attempt(r, h, o, limit, "", 0, "")
		if err != nil && l.ctx.Err() != nil {
			err = dlock.ErrClosed
		}
		return l.tried(h, busy, r.cut(err))
	}
	// Close ends every call in flight.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.ctx, func() { cancel(dlock.ErrClosed) })()
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), dlock.ErrClosed) {
			err = driver.Wrap("lock", key, dlock.ErrClosed)
		}
	}()
	if !wait {
		// Bounded by RequestTimeout on ctx itself, which Close ends too:
		// one context for the statement to watch, not a second on top.
		cut := time.AfterFunc(RequestTimeout, func() { cancel(errCut) })
		busy, err := l.attempt(ctx, h, o, limit, "", 0, "")
		if !cut.Stop() && err != nil && context.Cause(ctx) == errCut {
			err = &noAnswerError{err}
		}
		return l.tried(h, busy, err)
	}
	return l.wait(ctx, h, o, limit)
}

// tried is the answer of TryLock's attempt for h, which found the key
// busy for busy (when > 0) or failed with err.
func (l *Locker) tried(h *hold, busy time.Duration, err error) (dlock.Lock, error) {
	switch {
	case err != nil:
		return nil, driver.Wrap("lock", h.Key(), err)
	case busy > 0:
		return nil, &dlock.NotAcquiredError{Key: h.Key(), RetryAfter: busy}
	}
	return h, nil
}

// attempt makes one attempt: one statement. It returns 0 when h is now
// held, else how long the holder in the way has left (at least 1ns). A
// waiter names itself (waiter, registered for waitFor when busy), and a
// waiter for a lock gives the token of the hold a release may grant it
// (grant): an attempt that finds that hold takes it.
//
// An acquisition commits durably (the server's synchronous_commit): one
// that a crash lost would let the next acquisition take the same fence
// again. Only an attempt that finds the key busy and registers a waiter
// commits without waiting for its WAL (see schema.sql).
//
// When the statement fails, it may have run: the row it may have written
// is deleted by token, in the background, so that no hold is left that
// nobody renews or releases beyond its lease.
func (l *Locker) attempt(ctx context.Context, h *hold, o dlock.Options, limit int, waiter string, waitFor time.Duration, grant string) (time.Duration, error) {
	h.tbl.Attempted(h)
	h.SetToken(driver.NewToken())
	sent := time.Now()
	var fence, retryMS int64
	// Only a plain attempt at a lock inserts a new name's row in the
	// statement itself; the others leave it to the acquire function.
	sql, insert := l.sql.acquireKnown, false
	if h.Kind() == driver.HoldLock && waiter == "" && grant == "" && !l.known.has(h.name) {
		sql, insert = l.sql.acquire, true
	}
	err := l.pool.QueryRow(ctx, sql,
		h.name, h.Token(), h.Kind().Letter(), h.owner, o.TTL.Milliseconds(), limit, waiter, waitFor.Milliseconds(), grant).Scan(&fence, &retryMS)
	if err == nil && insert {
		l.known.add(h.name) // taken, or held by another: its row is there
	}
	if err != nil {
		// The grant's hold, when there is one, is not this attempt's to
		// give back: the next attempt or the waiter's leaving hands it on.
		l.giveBack(h.name, h.Token())
		return 0, err
	}
	if fence == 0 && retryMS < 0 {
		return 0, dlock.ErrUpgrade
	}
	if fence == 0 {
		return max(time.Duration(retryMS)*time.Millisecond, 1), nil
	}
	if retryMS == -2 { // the hold a release granted, renewed by this attempt
		h.SetToken(grant)
	}
	return 0, l.held(h, uint64(fence), sent, o)
}

// held makes h a hold with fence whose lease began at start, and watches
// it; when the Locker closed meanwhile, it gives the row back.
func (l *Locker) held(h *hold, fence uint64, start time.Time, o dlock.Options) error {
	h.SetFence(fence)
	if err := h.tbl.Add(h); err != nil { // closed meanwhile: give it back
		l.giveBack(h.name, h.Token())
		return err
	}
	l.wd.Add(h, start, o.TTL, o.AutoRenew)
	return nil
}

// giveBack deletes the row an acquisition may have written, on a context
// of its own (the caller's may have ended), in the background.
func (l *Locker) giveBack(name, token string) {
	l.cleanUp(func() {
		ctx, cancel := context.WithTimeout(context.Background(), driver.ReleaseTimeout)
		defer cancel()
		if _, err := l.releaseRow(ctx, name, token); err != nil {
			l.opts.Logger.Warn("could not give back an acquisition whose outcome is unknown; it lapses at its lease", "name", name, "error", err)
		}
	})
}

// wait makes attempts until h is held, ctx ends, the wait limit passes or
// the retry strategy gives up. Between attempts it sleeps until a release
// wakes it (a NOTIFY for its waiter id), the holder's lease would run
// out, or the fallback delay passes: the retry strategy's, at least a
// third of the TTL for a registered waiter (at least a second, or the
// third when shorter, for one that could not register).
// attemptGrace is how long an attempt may run past a wait's limit: a
// server that answers nothing ends the wait there, and the attempt's
// outcome is unknown (a hold it took lapses within its TTL).
const attemptGrace = time.Second

func (l *Locker) wait(ctx context.Context, h *hold, o dlock.Options, limit int) (dlock.Lock, error) {
	var (
		limitC  <-chan time.Time
		retry   = driver.NewBackoff(o.Retry)
		waiter  string
		grant   string    // the token of the hold a release may grant a lock's waiter
		since   time.Time // when the first attempt that could register was sent
		woken   <-chan wake
		lastErr error
		after   time.Duration
	)
	attemptCtx := func() (context.Context, context.CancelFunc) { return ctx, func() {} }
	if o.Waiting {
		t := time.NewTimer(o.Wait)
		defer t.Stop()
		limitC = t.C
		bound := time.Now().Add(o.Wait + attemptGrace)
		attemptCtx = func() (context.Context, context.CancelFunc) { return context.WithDeadline(ctx, bound) }
	}
	if o.Notify {
		waiter = l.waiterID()
		if h.Kind() == driver.HoldLock {
			grant = driver.NewToken()
		}
		var leave func()
		woken, leave = l.ln.wait(waiter)
		defer leave()
		defer func() {
			if h.State() != driver.Held {
				l.leave(h.name, waiter, grant)
			}
		}()
	}
	giveUp := func(cause error) error {
		if cause == nil && lastErr != nil {
			return h.Wrap("lock", lastErr)
		}
		return &dlock.NotAcquiredError{Key: h.Key(), RetryAfter: after, Err: cause}
	}
	// With notifications on, a registered waiter's fallback attempt only
	// covers a wake-up lost, so it comes a third of the TTL after the
	// last; one that could not register (its LISTEN session down, or its
	// attempt failed) tries again within a second.
	registered, unregistered := o.TTL/3, min(o.TTL/3, time.Second)
	window := 2*registered + time.Second // of a waiter's registration: past the next attempt
	for {
		// A waiter registers only while the LISTEN session is up, so that
		// the release that finds it reaches it; until then its attempts
		// are plain ones, and the session's coming up wakes it.
		as := waiter
		if as != "" && !l.ln.isUp() {
			as = ""
		}
		if as != "" && since.IsZero() {
			since = time.Now()
		}
		actx, cancel := attemptCtx()
		busy, err := l.attempt(actx, h, o, limit, as, window, grant)
		cancel()
		switch {
		case err == nil && busy == 0:
			return h, nil
		case ctx.Err() != nil:
			return nil, giveUp(context.Cause(ctx))
		case errors.Is(err, dlock.ErrUpgrade):
			return nil, h.Wrap("lock", err)
		case err != nil:
			lastErr = err
			l.opts.Logger.DebugContext(ctx, "attempt failed, waiting on", "key", h.Key(), "error", err)
		default:
			lastErr, after = nil, busy
		}
		d, ok := retry.Next()
		if !ok {
			return nil, giveUp(nil)
		}
		if o.Notify {
			if as != "" && err == nil {
				d = max(d, registered)
			} else {
				d = max(d, unregistered)
				l.ln.need()
			}
			window = 2*max(d, registered) + time.Second
		}
		if err == nil {
			d = min(d, busy)
		}
		h.tbl.Waiting(h)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, giveUp(context.Cause(ctx))
		case <-limitC:
			t.Stop()
			return nil, giveUp(nil)
		case w := <-woken:
			t.Stop()
			if w.named {
				h.tbl.Woken(h, false)
			}
			// A grant's lease began after the attempt that registered
			// this waiter was sent: with half of it left, the lock is
			// held, with no statement; else the next attempt takes it,
			// renewed.
			if w.fence > 0 && !since.IsZero() && time.Since(since) < o.TTL/2 {
				h.SetToken(grant)
				if err := l.held(h, w.fence, since, o); err != nil {
					return nil, h.Wrap("lock", err)
				}
				return h, nil
			}
		case <-t.C:
		}
	}
}

// leave removes a waiter's registration, so that releases stop waking
// it, and hands on the hold a release may have granted it (token grant);
// a registration that stays lapses within its window, a grant within its
// lease.
func (l *Locker) leave(name, waiter, grant string) {
	l.cleanUp(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.pool.Exec(ctx, l.sql.leave, name, waiter, grant)
	})
}
