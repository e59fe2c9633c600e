package redislock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var _ dlock.RWLocker = (*Locker)(nil)

// TryRLock makes one attempt to take the read lock of key, in one round
// trip (see dlock.RWLocker): it succeeds unless another owner holds the
// write lock or, for a newcomer, a writer waits. The read-write lock of
// key lives beside the lock of key: its keys are "<prefix>:rw:<key>" and
// companions in the same Cluster slot.
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldRead, key, 0, opts, false)
}

// RLock waits until it holds the read lock of key, as Lock waits.
func (l *Locker) RLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldRead, key, 0, opts, true)
}

// TryWLock makes one attempt to take the write lock of key: it succeeds
// when nobody else holds the key's read or write lock. An owner that holds
// the read lock gets an error matching dlock.ErrUpgrade.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldWrite, key, 0, opts, false)
}

// WLock waits until it holds the write lock of key, as Lock waits. From
// its second attempt it queues, and new readers wait behind it. The
// handle is a driver.Downgrader.
func (l *Locker) WLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldWrite, key, 0, opts, true)
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
