package redislock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/rediswait"
)

var _ driver.Watcher = (*Locker)(nil)

// Watch tells when key's lock may have changed hands: see [driver.Watcher].
//
// While a Locker watches a key, the key's sibling "<...>:o" exists (the
// watchers set it with a lease of 30s every 10s), and the scripts that
// change the lock's holder publish an empty message on a channel of that
// name with SPUBLISH: a release, ForceUnlock, and an acquisition by
// script (with an owner, fenced while waiting, fair or after a wait). A
// bare SET NX (a plain TryLock, or the first attempt of a plain Lock) and
// a lease that runs out send nothing: watchers learn of them at the next
// change or at their own fallback. A lock nobody watches costs nothing
// more: the release reads the observed key in the MGET that reads the
// lock, and learns from it also that someone queues (a waiter keeps the
// key while it queues, as long as the queue).
//
// Each Watch has one goroutine, stopped when ctx ends or the Locker
// closes, and shares the Locker's subscription connection of the key's
// shard with its waiters.
func (l *Locker) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if l.tables.Locks.Closed() {
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	return l.notify.Observe(ctx, l.opts.Prefix, key, 0, l.markObserved)
}

// markObserved sets the observed key of a watched lock.
func (l *Locker) markObserved(ctx context.Context, observed string) func([]bool) bool {
	if err := l.client.Set(ctx, observed, "1", rediswait.ObservedTTL).Err(); err != nil && ctx.Err() == nil {
		l.log.Debug("watch: marking the lock observed failed", "error", err)
	}
	return nil
}
