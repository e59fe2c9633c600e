package dlock

import (
	"context"
)

// Semaphore hands out permits of a key: at most limit holders at once,
// across processes. Each permit is a lease of its own, renewed by the
// watchdog like a lock, with the same loss signal ([Lock.Done] and
// [Lock.Err]) and, when asked for ([WithFencing]), a fence drawn from one
// counter per key. A holder that crashes gives its permit back when its
// lease runs out; a release wakes the waiters that now fit.
//
// The limit travels with every acquisition and the latest one wins: an
// acquisition that gives a new limit changes it for everyone. Holders
// above a lowered limit keep their permits until they release them; no
// one is admitted until the holders are fewer than the new limit. A raised
// limit admits waiters at once.
//
// A permit is not reentrant: every acquisition takes a permit of its own,
// whatever its owner, so a holder that asks again for the same key counts
// twice (and, at a limit of one, waits on itself). The owner of an
// acquisition ([WithOwner], [ContextWithOwner]) only tells Release which
// permit to give back.
type Semaphore interface {
	// TryAcquire makes one attempt to take a permit of key. When limit
	// permits are out, it returns an error matching ErrNotAcquired, a
	// *NotAcquiredError whose RetryAfter is the time until the first of
	// them runs out when the store knows it. A limit outside 1 to MaxLimit
	// is an error matching ErrInvalidOption.
	TryAcquire(ctx context.Context, key string, limit int, opts ...Option) (Lock, error)
	// Acquire waits until it holds a permit of key, ctx ends, the WithWait
	// limit passes or the WithRetry strategy gives up, as Locker.Lock does.
	Acquire(ctx context.Context, key string, limit int, opts ...Option) (Lock, error)
	// Release gives back this Locker's most recent permit of key for the
	// owner in ctx (or, when ctx carries none, its most recent permit made
	// without one or with WithOwner). It returns an error matching
	// ErrNotHeld when there is none.
	Release(ctx context.Context, key string) error
}

// Permits returns a Locker whose locks are permits of s at the given
// limit: its Lock and TryLock acquire a permit, its Unlock releases one,
// so that [Do], [Guard] and everything else built on a Locker work with
// permits. Close does nothing: the view owns nothing, and the Locker
// behind s is closed by its own Close. A limit outside 1 to MaxLimit makes
// every acquisition fail with ErrInvalidOption.
func Permits(s Semaphore, limit int) Locker { return permits{s, limit} }

type permits struct {
	s     Semaphore
	limit int
}

func (p permits) TryLock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return p.s.TryAcquire(ctx, key, p.limit, opts...)
}

func (p permits) Lock(ctx context.Context, key string, opts ...Option) (Lock, error) {
	return p.s.Acquire(ctx, key, p.limit, opts...)
}

func (p permits) Unlock(ctx context.Context, key string) error { return p.s.Release(ctx, key) }

func (p permits) Close() error { return nil }
