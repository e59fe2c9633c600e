package redislock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var _ dlock.Semaphore = (*Locker)(nil)

// TryAcquire makes one attempt to take a permit of key, in one round trip:
// it succeeds while fewer than limit permits of key are out (see
// dlock.Semaphore). The limit becomes the semaphore's. A permit is a lease
// of its own, renewed by the watchdog, lost (Done, Err) when renewal
// fails, fenced when asked. When limit permits are out the error is a
// *dlock.NotAcquiredError whose RetryAfter is the time until the first of
// them runs out. In fair mode (dlock.WithFair) it does not take a free
// permit while others queue for one.
//
// The semaphore of key lives beside the lock of key, not on it: its keys
// are "<prefix>:sem:<key>" and companions in the same Cluster slot.
func (l *Locker) TryAcquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldPermit, key, limit, opts, false)
}

// Acquire waits until it holds a permit of key, as Lock waits for a lock:
// waiters queue in Redis, and a release (or a permit whose lease ended, or
// a raised limit) grants the waiters at the head of the queue that now fit
// and wakes them, with the fallback sleep of Lock.
func (l *Locker) Acquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.acquireHold(ctx, driver.HoldPermit, key, limit, opts, true)
}

// Release gives back this Locker's most recent permit of key for the owner
// in ctx; when ctx carries none, its most recent permit acquired without
// an owner or with dlock.WithOwner. It returns an error matching
// dlock.ErrNotHeld when there is none.
func (l *Locker) Release(ctx context.Context, key string) error {
	lk, err := l.tables.Permits.Find(ctx, key)
	if err != nil {
		return err
	}
	return lk.Unlock(ctx)
}
