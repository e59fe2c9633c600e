package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

var _ dlock.Watcher = (*Locker)(nil)

// observedTTL is how long the observed key of a lock outlives the last
// watcher that kept it alive; watchers set it again every third of it.
const observedTTL = 30 * time.Second

// Watch tells when key's lock may have changed hands: see [dlock.Watcher].
//
// While a Locker watches a key, the key's sibling "<...>:o" exists (the
// watchers set it with a lease of 30s every 10s), and the scripts that
// change the lock's holder publish an empty message on a channel of that
// name with SPUBLISH: a release, ForceUnlock, and an acquisition by
// script (with an owner, fenced while waiting, fair or after a wait). A
// bare SET NX (a plain TryLock, or the first attempt of a plain Lock) and
// a lease that runs out send nothing: watchers learn of them at the next
// change or at their own fallback. A lock nobody watches costs nothing
// more: the release's check for a queue asks for the observed key in the
// same EXISTS.
//
// Each Watch has one goroutine, stopped when ctx ends or the Locker
// closes, and shares the Locker's subscription connection of the key's
// shard with its waiters.
func (l *Locker) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if l.table.Closed() {
		return nil, &dlock.KeyError{Op: "watch", Key: key, Err: dlock.ErrClosed}
	}
	k, err := redisnode.Of(l.opts.Prefix, key)
	if err != nil {
		return nil, err
	}
	if !l.notify.start() {
		return nil, &dlock.KeyError{Op: "watch", Key: key, Err: dlock.ErrClosed}
	}
	out := make(chan struct{}, 1)
	go func() {
		defer l.notify.running.Done()
		defer close(out)
		l.observe(ctx, k.Observed, out)
	}()
	return out, nil
}

// observe keeps the observed key alive and passes its channel's messages
// on to out, until ctx ends or the Locker closes.
func (l *Locker) observe(ctx context.Context, observed string, out chan<- struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.notify.closing, cancel)()
	mark := func() {
		if err := l.client.Set(ctx, observed, "1", observedTTL).Err(); err != nil && ctx.Err() == nil {
			l.log.Debug("watch: marking the lock observed failed", "error", err)
		}
	}
	mark() // before subscribing: a change from now on is published
	wake, unwatch := l.notify.watch(ctx, observed, driver.NewToken(), time.Time{})
	defer unwatch()
	tell(out) // in place: whatever changed before, a read from now on sees it
	t := time.NewTicker(observedTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			tell(out)
		case <-t.C:
			mark()
		}
	}
}

// tell sends on a channel of capacity one without blocking: a value not
// yet received stands for this one too.
func tell(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}

// start counts a goroutine that stop waits for, unless the notifier has
// stopped; it reports whether it counted one.
func (n *notifier) start() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	n.running.Add(1)
	return true
}
