package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/settings"
)

// LockAll acquires every key of keys with l, all or nothing, and returns
// them as one Lock. It takes the keys one by one in a fixed global order
// (sorted, bytewise; duplicates count once), waiting for each as l.Lock
// waits, and gives back the keys it took when one cannot be had: so
// callers that lock {a, b} and {b, a} at the same time never deadlock,
// for both wait for a first. A WithWait limit bounds the whole
// acquisition, not each key.
//
// When ctx carries no owner, LockAll acquires for a fresh owner of its
// own (as [Do] does), so that goroutines sharing one Locker contend as
// separate parties.
//
// When l is a driver.MultiLocker that can take the keys together (in Redis:
// one server, or one Cluster slot), the first attempt takes them all at
// once, all or none: one round trip, where the ordered path makes one per
// key. If a key is busy, LockAll waits in the ordered path: it takes the
// keys one by one, queueing on each busy key as l.Lock does, and holding
// only keys before it in the order. So a multi-key waiter keeps its place
// in each key's queue, served in turn with the single-key waiters of that
// key, and waits only on a key above every key it holds, which keeps
// callers of any mix of orders free of deadlock. (Retrying the
// all-at-once attempt instead would starve against a queue: a busy key
// that has waiters passes from holder to waiter and is never seen free.)
//
// The Lock it returns is held while every key is: its Done closes when
// any of them is lost (Err is that loss) or when Unlock releases them
// all. Its Key is the keys in their order, joined by commas; its Fence is
// the highest of their fences (each key's own is in [MultiLock.Locks]).
// Its Unlock releases them through its driver's UnlockMulti when l has
// it: in one round trip when they share a server or slot.
func LockAll(ctx context.Context, l Locker, keys []string, opts ...Option) (Lock, error) {
	return lockAll(ctx, l, keys, opts, true)
}

// TryLockAll makes one attempt at every key of keys, all or none: at once
// when l is a driver.MultiLocker that can take them together, else one by one
// in the order of [LockAll], giving back what it took when a key is busy.
// When one is busy, the error is that key's *NotAcquiredError.
func TryLockAll(ctx context.Context, l Locker, keys []string, opts ...Option) (Lock, error) {
	return lockAll(ctx, l, keys, opts, false)
}

// DoAll is [Do] over several keys: it acquires them with [LockAll], runs
// fn while holding them all, and releases them when fn returns or panics.
// fn's context ends the moment any of the keys is lost.
func DoAll(ctx context.Context, l Locker, keys []string, fn func(context.Context) error, opts ...Option) (err error) {
	if l == nil {
		return ErrNilClient
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = ContextWithOwner(ctx, settings.NewToken())
	}
	lk, err := LockAll(ctx, l, keys, opts...)
	if err != nil {
		return err
	}
	guarded, release := Guard(ctx, lk)
	defer func() { err = both(err, release()) }()
	return fn(guarded)
}

func lockAll(ctx context.Context, l Locker, keys []string, opts []Option, wait bool) (Lock, error) {
	if l == nil {
		return nil, ErrNilClient
	}
	if len(keys) == 0 {
		return nil, &KeyError{Op: "lock", Err: fmt.Errorf("%w: no keys", ErrInvalidKey)}
	}
	o, err := Options{}.Apply(opts...)
	if err != nil {
		return nil, &KeyError{Op: "lock", Key: keys[0], Err: err}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = ContextWithOwner(ctx, settings.NewToken())
	}
	actx := ctx // bounds the whole acquisition when a wait limit is set
	if wait && o.Waiting && o.Wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeoutCause(ctx, o.Wait, errWaitLimit)
		defer cancel()
	}
	m := &MultiLock{keys: sorted}
	if ml, ok := l.(multiLocker); ok {
		m.unlock = ml.UnlockMulti
		if len(sorted) > 1 {
			locks, err := ml.TryLockMulti(actx, sorted, opts...)
			switch {
			case err == nil:
				m.locks = locks
				return m, nil
			case errors.Is(err, ErrNotTogether):
			case !wait || o.Waiting && o.Wait == 0 || !errors.Is(err, ErrNotAcquired):
				return nil, waitLimited(ctx, actx, sorted[0], err)
			}
			// busy: wait in the ordered path, in the keys' queues
		}
	}
	m.locks = make([]Lock, 0, len(sorted))
	for _, k := range sorted {
		var lk Lock
		if wait {
			lk, err = l.Lock(actx, k, opts...)
		} else {
			lk, err = l.TryLock(ctx, k, opts...)
		}
		if err != nil {
			m.rollback(ctx)
			return nil, waitLimited(ctx, actx, k, err)
		}
		m.locks = append(m.locks, lk)
	}
	return m, nil
}

var errWaitLimit = errors.New("dlock: wait limit")

// waitLimited is err, the error of an acquisition of key under actx, or
// key's *NotAcquiredError (with the RetryAfter that err had, if any) when
// actx's wait limit ended it rather than the caller's ctx.
func waitLimited(ctx, actx context.Context, key string, err error) error {
	if !errors.Is(context.Cause(actx), errWaitLimit) || ctx.Err() != nil {
		return err
	}
	limited := &NotAcquiredError{Key: key}
	if busy, ok := errors.AsType[*NotAcquiredError](err); ok {
		limited.RetryAfter = busy.RetryAfter
	}
	return limited
}

// multiLocker is driver.MultiLocker, which package dlock cannot import.
type multiLocker interface {
	Locker
	TryLockMulti(ctx context.Context, keys []string, opts ...Option) ([]Lock, error)
	UnlockMulti(ctx context.Context, locks []Lock) error
}

// MultiLock is the Lock of several keys that [LockAll] and [TryLockAll]
// return: held while every key is held. Its methods are safe for
// concurrent use.
type MultiLock struct {
	keys   []string
	locks  []Lock
	unlock func(context.Context, []Lock) error // the driver's UnlockMulti, or nil

	mu      sync.Mutex
	done    chan struct{} // made by the first Done
	err     error         // why the hold ended
	watched bool
}

var _ Lock = (*MultiLock)(nil)

// Locks returns the lock of each key, in the order they were taken.
func (m *MultiLock) Locks() []Lock { return slices.Clone(m.locks) }

// Key returns the keys, in the order they were taken, joined by commas.
func (m *MultiLock) Key() string { return strings.Join(m.keys, ",") }

// Token returns the tokens of the keys' locks, joined by commas.
func (m *MultiLock) Token() string {
	ts := make([]string, len(m.locks))
	for i, lk := range m.locks {
		ts[i] = lk.Token()
	}
	return strings.Join(ts, ",")
}

// Fence returns the highest fence of the keys' locks. A storage that
// guards one key should take that key's own fence, from Locks.
func (m *MultiLock) Fence() uint64 {
	var f uint64
	for _, lk := range m.locks {
		f = max(f, lk.Fence())
	}
	return f
}

// Unlock releases every key: in one step when the Locker is a
// driver.MultiLocker, else one by one, the last taken first.
// It returns the errors of the releases that failed, joined; a key that
// was lost returns its loss, which matches ErrNotHeld.
func (m *MultiLock) Unlock(ctx context.Context) error {
	err := m.release(ctx)
	m.end(&KeyError{Op: "unlock", Key: m.Key(), Err: ErrNotHeld})
	return err
}

// release releases every key: through the driver's UnlockMulti, or one by
// one, the last taken first.
func (m *MultiLock) release(ctx context.Context) error {
	if m.unlock != nil {
		return m.unlock(ctx, m.locks)
	}
	var errs []error
	for i := len(m.locks) - 1; i >= 0; i-- {
		if err := m.locks[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// UnlockAfter lets every key lapse d from now (see [UnlockAfter]): the hold
// ends as released, and each key stays taken until d has passed. It
// returns an error matching errors.ErrUnsupported, and changes nothing,
// when a key's lock cannot lapse. A d of zero or less is Unlock.
func (m *MultiLock) UnlockAfter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return m.Unlock(ctx)
	}
	lapsers := make([]lapser, len(m.locks))
	for i, lk := range m.locks {
		l, ok := lk.(lapser)
		if !ok {
			return &KeyError{Op: "unlock", Key: m.Key(), Err: fmt.Errorf("the lock of %q cannot lapse: %w", lk.Key(), errors.ErrUnsupported)}
		}
		lapsers[i] = l
	}
	var errs []error
	for _, l := range lapsers {
		if err := l.UnlockAfter(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	m.end(&KeyError{Op: "unlock", Key: m.Key(), Err: ErrNotHeld})
	return errors.Join(errs...)
}

// Refresh sets the remaining lease of every key to ttl.
func (m *MultiLock) Refresh(ctx context.Context, ttl time.Duration) error {
	var errs []error
	for _, lk := range m.locks {
		if err := lk.Refresh(ctx, ttl); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TTL returns the shortest remaining lease among the keys.
func (m *MultiLock) TTL(ctx context.Context) (time.Duration, error) {
	var least time.Duration
	for i, lk := range m.locks {
		d, err := lk.TTL(ctx)
		if err != nil {
			return 0, err
		}
		if i == 0 || d < least {
			least = d
		}
	}
	return least, nil
}

// Done returns a channel that is closed when any key's lock ends: lost,
// or released by Unlock. The first call starts one goroutine per key,
// which ends with that key's lock.
func (m *MultiLock) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done == nil {
		m.done = make(chan struct{})
		if m.err != nil {
			close(m.done)
		}
	}
	if !m.watched {
		m.watched = true
		for _, lk := range m.locks {
			go func() {
				<-lk.Done()
				err := lk.Err()
				if err == nil {
					err = &KeyError{Op: "unlock", Key: lk.Key(), Err: ErrNotHeld}
				}
				m.end(err)
			}()
		}
	}
	return m.done
}

// Err is nil while every key is held; then why the hold ended: the loss
// of the first key lost, or ErrNotHeld after Unlock.
func (m *MultiLock) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		for _, lk := range m.locks {
			if err := lk.Err(); err != nil {
				return err
			}
		}
	}
	return m.err
}

func (m *MultiLock) end(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	m.err = err
	if m.done != nil {
		close(m.done)
	}
}

// rollback gives back the keys taken so far, on a context detached from
// the caller's (which may have ended).
func (m *MultiLock) rollback(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	m.release(rctx)
}
