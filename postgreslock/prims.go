package postgreslock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// TryAcquire makes one attempt to take a permit of key, of which limit
// may be out at once. See [dlock.Semaphore]. Each permit is a hold row of
// its own, with its own token, lease and fence.
func (l *Locker) TryAcquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldPermit, key, limit, false, opts)
}

// Acquire waits for a permit of key, as Lock waits for a lock.
func (l *Locker) Acquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldPermit, key, limit, true, opts)
}

// Release gives back this Locker's most recent permit of key (see
// [dlock.Semaphore]).
func (l *Locker) Release(ctx context.Context, key string) error {
	h, err := l.tables.Permits.Find(ctx, key)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}

// TryRLock makes one attempt to take the read lock of key: it is granted
// while no writer of another owner holds the key or waits for it.
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldRead, key, 0, false, opts)
}

// RLock waits for the read lock of key.
func (l *Locker) RLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldRead, key, 0, true, opts)
}

// TryWLock makes one attempt to take the write lock of key: it is granted
// while no hold of another owner is on the key.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldWrite, key, 0, false, opts)
}

// WLock waits for the write lock of key. While it waits, readers that
// come after it wait too.
func (l *Locker) WLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldWrite, key, 0, true, opts)
}

// RUnlock releases this Locker's most recent read lock of key.
func (l *Locker) RUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, true)
}

// WUnlock releases this Locker's most recent write lock of key.
func (l *Locker) WUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, false)
}
