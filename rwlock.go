package dlock

import (
	"context"
	"fmt"
)

// RWLocker hands out read-write locks: many readers of a key at once, or
// one writer. Each hold, read or write, is a lease of its own, renewed by
// the watchdog, with the loss signal and the errors of a [Lock]; with
// [WithFencing] readers and writers draw their fences from one counter per
// key, so that the storage they guard can order them.
//
// Writers come first: once a writer waits, new readers wait behind it, so
// a constant stream of readers cannot starve it (readers already inside
// finish first). A writer may become a reader without letting anyone in
// between ([Downgrade]); a reader never becomes a writer: an owner that
// holds a read lock and asks for the write lock of the same key gets
// ErrUpgrade at once, where it would otherwise wait on itself for ever.
//
// A read-write lock lives in a namespace of its own: the read-write lock
// of a key and the Lock of the same key do not exclude each other.
//
// Reentrancy is by owner, as for a Lock: an owner that holds the write
// lock may take it again, and may take the read lock as well; an owner
// that holds a read lock may take it again even while a writer waits.
// Without an owner, a Locker that holds a key's read or write lock
// refuses a second hold of it with ErrAlreadyHeld (a second read would
// wait behind a waiting writer that waits on the first).
type RWLocker interface {
	// TryRLock makes one attempt to take the read lock of key.
	TryRLock(ctx context.Context, key string, opts ...Option) (Lock, error)
	// RLock waits until it holds the read lock of key, as Locker.Lock
	// waits.
	RLock(ctx context.Context, key string, opts ...Option) (Lock, error)
	// RUnlock releases this Locker's most recent read lock of key, in the
	// manner of Locker.Unlock.
	RUnlock(ctx context.Context, key string) error
	// TryWLock makes one attempt to take the write lock of key.
	TryWLock(ctx context.Context, key string, opts ...Option) (Lock, error)
	// WLock waits until it holds the write lock of key, as Locker.Lock
	// waits. While it waits, new readers wait behind it.
	WLock(ctx context.Context, key string, opts ...Option) (Lock, error)
	// WUnlock releases this Locker's most recent write lock of key, in the
	// manner of Locker.Unlock.
	WUnlock(ctx context.Context, key string) error
}

// downgrader is driver.Downgrader, which package dlock cannot import.
type downgrader interface {
	Downgrade(ctx context.Context) error
}

// Downgrade turns lk, a write lock of an [RWLocker], into a read lock of
// the same key in one step, without letting a writer in between: the
// handle stays held, with the same token, fence, lease and Done. Readers
// that waited behind it may enter, unless another writer waits ahead of
// them.
// It returns an error matching ErrInvalidOption when lk is not a write
// lock, and ErrNotHeld when lk was released or lost.
func Downgrade(ctx context.Context, lk Lock) error {
	d, ok := lk.(downgrader)
	if !ok {
		return &KeyError{Op: "downgrade", Key: lk.Key(), Err: fmt.Errorf("%w: %T is not a write lock", ErrInvalidOption, lk)}
	}
	return d.Downgrade(ctx)
}

// RLocker returns a Locker whose locks are the read locks of rw, in the
// manner of sync.RWMutex.RLocker, so that [Do], [Guard] and everything
// else built on a Locker work with read locks. Close does nothing: the
// Locker behind rw is closed by its own Close.
func RLocker(rw RWLocker) Locker { return rlocker{rw} }

// WLocker returns a Locker whose locks are the write locks of rw (see
// [RLocker]).
func WLocker(rw RWLocker) Locker { return wlocker{rw} }

type rlocker struct{ rw RWLocker }

func (r rlocker) TryLock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return r.rw.TryRLock(ctx, key, opts...)
}
func (r rlocker) Lock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return r.rw.RLock(ctx, key, opts...)
}
func (r rlocker) Unlock(ctx context.Context, key string) error { return r.rw.RUnlock(ctx, key) }
func (r rlocker) Close() error                                 { return nil }

type wlocker struct{ rw RWLocker }

func (w wlocker) TryLock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return w.rw.TryWLock(ctx, key, opts...)
}
func (w wlocker) Lock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return w.rw.WLock(ctx, key, opts...)
}
func (w wlocker) Unlock(ctx context.Context, key string) error { return w.rw.WUnlock(ctx, key) }
func (w wlocker) Close() error                                 { return nil }
