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
// The Lock it returns is held while every key is: its Done closes when
// any of them is lost (Err is that loss) or when Unlock releases them
// all. Its Key is the keys in their order, joined by commas; its Fence is
// the highest of their fences (each key's own is in [MultiLock.Locks]).
func LockAll(ctx context.Context, l Locker, keys []string, opts ...Option) (Lock, error) {
	return lockAll(ctx, l, keys, opts, true)
}

// TryLockAll makes one attempt at every key of keys, in the order of
// [LockAll], and gives back what it took when a key is busy: the error is
// that key's *NotAcquiredError.
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
	o, err := settings.Options{}.Apply(opts...)
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
	m := &MultiLock{keys: sorted, locks: make([]Lock, 0, len(sorted))}
	for _, k := range sorted {
		var lk Lock
		if wait {
			lk, err = l.Lock(actx, k, opts...)
		} else {
			lk, err = l.TryLock(ctx, k, opts...)
		}
		if err != nil {
			if errors.Is(context.Cause(actx), errWaitLimit) && ctx.Err() == nil {
				err = &NotAcquiredError{Key: k} // the wait limit, not the caller's context
			}
			m.rollback(ctx)
			return nil, err
		}
		m.locks = append(m.locks, lk)
	}
	return m, nil
}

var errWaitLimit = errors.New("dlock: wait limit")

// MultiLock is the Lock of several keys that [LockAll] and [TryLockAll]
// return: held while every key is held. Its methods are safe for
// concurrent use.
type MultiLock struct {
	keys  []string
	locks []Lock

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

// Unlock releases every key, the last taken first. It returns the errors
// of the releases that failed, joined; a key that was lost returns its
// loss, which matches ErrNotHeld.
func (m *MultiLock) Unlock(ctx context.Context) error {
	var errs []error
	for i := len(m.locks) - 1; i >= 0; i-- {
		if err := m.locks[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.end(&KeyError{Key: m.Key(), Err: ErrNotHeld})
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
					err = &KeyError{Key: lk.Key(), Err: ErrNotHeld}
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
	for i := len(m.locks) - 1; i >= 0; i-- {
		m.locks[i].Unlock(rctx)
	}
}
