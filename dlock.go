package dlock

import (
	"context"
	"time"
)

// Locker hands out distributed locks. Every method is safe for concurrent
// use. A Locker is one party in the contention for a key: without an owner
// (see [WithOwner]) it refuses to acquire a key it already holds, with
// [ErrAlreadyHeld], instead of waiting on itself.
type Locker interface {
	// TryLock makes exactly one attempt to acquire key. When another party
	// holds it, TryLock returns an error that matches ErrNotAcquired and is a
	// *NotAcquiredError carrying the holder's remaining lease when known.
	TryLock(ctx context.Context, key string, opts ...Option) (Lock, error)

	// Lock waits until it holds key, ctx ends, the WithWait limit passes or
	// the WithRetry strategy gives up. When it stops waiting, the error
	// matches ErrNotAcquired and, when ctx ended, ctx.Err() as well.
	Lock(ctx context.Context, key string, opts ...Option) (Lock, error)

	// Unlock releases this Locker's own hold on key: the most recent hold
	// made for the owner in ctx, or the hold without owner when ctx carries
	// none. It returns ErrNotHeld when this Locker holds no such lock.
	Unlock(ctx context.Context, key string) error

	// Close stops the Locker's background work, releases the locks it still
	// holds, and makes every later call return ErrClosed.
	Close() error
}

// Lock is one held lock, returned by [Locker.TryLock] and [Locker.Lock].
// Its methods are safe for concurrent use.
type Lock interface {
	// Key is the key the caller asked for, without the driver's prefix.
	Key() string
	// Token is the random value that identifies this acquisition on the
	// server. Keep it secret: whoever knows it can release the lock.
	Token() string
	// Fence is the fencing token of this acquisition: strictly greater than
	// every fence handed out earlier for the same key, or zero when the
	// acquisition did not ask for one ([WithFencing]) and the backend does
	// not make one anyway (etcd always does). Hand it to the
	// storage the lock protects, which keeps the highest fence it has seen
	// and refuses a write that carries a lower one: a holder that paused
	// past its lease cannot then overwrite its successor's work. The
	// guarantee is the backend's: a Redis that loses data (a restart without
	// persistence, a failover to a replica that missed the write) can hand
	// out a fence again; etcd's revisions cannot go back.
	Fence() uint64

	// Unlock releases the lock. Unlocking twice returns ErrNotHeld; unlocking
	// a lock that was lost returns the reason it was lost, which matches
	// ErrNotHeld too.
	Unlock(ctx context.Context) error
	// Refresh sets the lock's remaining lease to ttl, provided it is still
	// held; otherwise it returns an error matching ErrNotHeld.
	Refresh(ctx context.Context, ttl time.Duration) error
	// TTL asks the server for the lock's remaining lease.
	TTL(ctx context.Context) (time.Duration, error)

	// Done returns a channel that is closed when the lock is released or
	// lost, in the manner of context.Context.
	Done() <-chan struct{}
	// Err is nil while the lock is held. After Done is closed it is
	// ErrNotHeld when the lock was released, or a *LostError that says why
	// it was lost.
	Err() error
}
