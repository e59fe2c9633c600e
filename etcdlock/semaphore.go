package etcdlock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// TryAcquire makes one attempt to take a permit of key (see
// dlock.Semaphore): one transaction puts the permit's key at the end of
// the key's queue, writes the limit and reads the queue; the permit is
// taken when fewer than the limit of keys are ahead of it, and its key is
// deleted again (a second round trip) when not. The limit becomes the
// semaphore's. A permit is a lease as a lock's: kept alive by the session
// of the Locker, lost (Done, Err) when the lease ends or its key is
// deleted, fenced by its create revision. When the permits are out, the
// error is a *dlock.NotAcquiredError whose RetryAfter is the remaining
// lease of the oldest of them.
//
// The semaphore of key lives beside the lock of key, not on it: its keys
// are "<prefix>/sem/<key>/<token>", and its limit the value of
// "<prefix>/sem/<key>/", kept on the lease of the acquisition that wrote
// it last; when that lease ends, each caller goes by its own limit until
// another acquisition writes one.
func (l *Locker) TryAcquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldPermit, key, limit, false, opts)
}

// Acquire waits until it holds a permit of key, as Lock waits: its key
// stays in the queue, and a watch tells it when the permits ahead of it
// are released or run out, or the limit is raised. Waiters are admitted
// in the order they queued. The permit's fence is the revision at which
// it was admitted.
func (l *Locker) Acquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldPermit, key, limit, true, opts)
}

// Release gives back this Locker's most recent permit of key for the owner
// in ctx; when ctx carries none, its most recent permit acquired without
// an owner or with dlock.WithOwner. It returns an error matching
// dlock.ErrNotHeld when there is none.
func (l *Locker) Release(ctx context.Context, key string) error {
	h, err := l.tables.Permits.Find(ctx, key)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}
