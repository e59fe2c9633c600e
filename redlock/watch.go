package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/rediswait"
)

var _ driver.Watcher = (*Locker)(nil)

// watchTimeout bounds how long a watch waits to be in place (at least
// twice the per-node timeout).
const watchTimeout = 2 * time.Second

// Watch tells when key's lock may have changed hands: see [driver.Watcher].
//
// While a Locker watches a key, the key's sibling "<...>:o" exists on
// every node (the watch sets it with a lease of 30s every 10s), and the
// scripts that change the lock's holder on a node publish an empty
// message on a channel of that name there, with SPUBLISH: an acquisition
// (the plain SET NX path included), a release, a hand-over to a waiter,
// and ForceUnlock. The watch subscribes on every node, on the Locker's
// subscription connection of each, and is in place once a majority of
// the nodes has the observed key and confirmed the subscription: any
// majority that a holder takes or leaves shares a node with it, which
// tells. It stops waiting after 2s (at least twice the per-node timeout),
// and then relies on the nodes that came in; the others subscribe when
// they answer. So one change of the majority's holder is told up to once
// per node, which the channel folds into as few values as the reader
// leaves unread; a reader that reads the lock (Inspect) on each value
// sees the majority's view once every node's message came. A lease that
// runs out sends nothing. A lock nobody watches costs one EXISTS more in the
// acquisition's script, and none in the release's, which asks for the
// queue and the observed key in one.
//
// Each Watch has one goroutine, stopped when ctx ends or the Locker
// closes.
func (l *Locker) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if l.tables.Locks.Closed() {
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	return l.notify.Observe(ctx, l.opts.Prefix, key, max(2*l.timeout, watchTimeout), l.markObserved)
}

// markObserved sets the observed key on every node at once. The watch is
// in place once a majority of the nodes publish the key's changes and
// have confirmed the subscription: every majority that a holder takes or
// leaves shares one of them.
func (l *Locker) markObserved(ctx context.Context, observed string) func([]bool) bool {
	send := func(ctx context.Context, nd *node) reply {
		return reply{err: nd.client.Set(ctx, observed, "1", rediswait.ObservedTTL).Err()}
	}
	got, rd := l.fanout(ctx, l.nodes, l.timeout, send, nil, nil)
	rd.settle(false)
	marked := make([]bool, len(l.nodes))
	for _, r := range got {
		marked[r.node] = r.err == nil
		if r.err != nil && ctx.Err() == nil {
			l.log.Debug("watch: marking the lock observed failed", "node", l.nodes[r.node].addr, "error", r.err)
		}
	}
	return func(confirmed []bool) bool {
		n := 0
		for i, c := range confirmed {
			if c && marked[i] {
				n++
			}
		}
		return n >= l.quorum
	}
}
