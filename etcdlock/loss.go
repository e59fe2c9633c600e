package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// How a hold learns of its loss, at no cost to a short hold. The hold
// ends with its lease at once: a hold on the Locker's session is found and
// ended by the session's end (see sessionEnded), so that holds register
// nothing with the session, which every hold shares; a hold on a lease of
// its own follows that lease's context (context.AfterFunc).
// A hold still held watchAfter after its acquisition watches its key from
// the revision that created it (see watch): the watch replays a delete
// made meanwhile, so a key deleted by someone else (an operator, dlock's
// ForceUnlock) ends its hold within watchAfter and a round trip, and at
// once after that. An uncontended acquire and release cycle is so two
// round trips, the write and the release, with no watch of its own.

// watchAfter is how long a hold lives before it watches its key.
const watchAfter = time.Second

// attach makes h, just registered as held, a hold on ls: it ends with
// ls, and watches its key after watchAfter. A hold that ended meanwhile
// (its onEnd, detach, ran first) is not attached.
func (h *hold) attach(ls *lease) {
	h.mu.Lock()
	h.lease = ls
	if h.detached {
		h.mu.Unlock()
		return
	}
	h.followLease(ls)
	h.watchTimer = time.AfterFunc(h.l.watchAfter, h.startWatch)
	h.mu.Unlock()
	if ls.shared && ls.lost() {
		// The session ended before h was in the table, where its end
		// looks for the holds on it: h was registered (and in the table)
		// before this read, so that one of the two ends it.
		h.lose(context.Cause(ls.ctx))
	}
}

// followLease makes h, unless it is on the Locker's session (see
// sessionEnded), end with ls; h.mu is held.
func (h *hold) followLease(ls *lease) {
	if ls.shared {
		h.stopLease = nil
		return
	}
	h.stopLease = context.AfterFunc(ls.ctx, func() {
		// A Refresh that moved the hold to another lease closes the old
		// one: that end is not the hold's.
		if h.currentLease() == ls {
			h.lose(context.Cause(ls.ctx))
		}
	})
}

// sessionEnded ends the holds on ls, the Locker's session, which ended:
// run once, when it ends (see startSession). A hold that a Refresh moved
// to a lease of its own is not on ls any more.
func (l *Locker) sessionEnded(ls *lease) {
	cause := context.Cause(ls.ctx)
	for _, t := range l.tables.All() {
		for _, h := range t.Held() {
			if h.currentLease() == ls {
				h.lose(cause)
			}
		}
	}
}

// startWatch starts the watch of h, unless h ended or its Locker closed:
// counted under l.mu, where Close closes the table before it waits.
func (h *hold) startWatch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.detached {
		return
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.tables.Locks.Closed() {
		return
	}
	h.stop = make(chan struct{})
	h.l.wg.Go(h.watch)
}

// detach is the onEnd of the hold's table: the hold no longer ends with
// its lease, and its watch stops or never starts.
func (h *hold) detach() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.detached = true
	if h.stopLease != nil {
		h.stopLease()
	}
	if h.watchTimer != nil {
		h.watchTimer.Stop()
	}
	if h.stop != nil {
		close(h.stop)
	}
}

// moveLocked moves h to the lease ls, after a Refresh wrote its key
// there; h.mu is held.
func (h *hold) moveLocked(ls *lease) {
	h.lease = ls
	if h.detached {
		return
	}
	if h.stopLease != nil {
		h.stopLease()
	}
	h.followLease(ls)
}

// watch ends the hold when its key is deleted by someone else or its
// lease ends. Its calls to etcd end with the lease: a watch or read that
// etcd cannot answer (the client is cut off) must not keep the hold from
// seeing its lease deadline pass.
func (h *hold) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.stop
		cancel()
	}()
	from := h.rev + 1
	for {
		if ctx.Err() != nil {
			return // the hold ended
		}
		ls := h.currentLease()
		if ls.lost() {
			switch {
			case ctx.Err() != nil:
				return
			case h.currentLease() != ls:
				continue // Refresh moved the hold to another lease
			}
			// The lease ended under the hold: it ran out, etcd dropped
			// it, or Close revoked it after a release that failed.
			h.lose(ls.err)
			return
		}
		lctx, lcancel := context.WithCancel(ctx)
		stopLs := context.AfterFunc(ls.ctx, lcancel)
		if h.follow(lctx, ls, from) {
			lcancel()
			stopLs()
			h.lose(fmt.Errorf("%w: the etcd key of revision %d was deleted", dlock.ErrOwnershipLost, h.rev))
			return
		}
		if ls.lost() || ctx.Err() != nil {
			lcancel()
			stopLs()
			continue // the top of the loop decides
		}
		// The watch ended (compaction, a broken stream): check and watch
		// again.
		gctx, gcancel := context.WithTimeout(lctx, 5*time.Second)
		resp, err := h.l.cli.Get(gctx, h.name)
		gcancel()
		lcancel()
		stopLs()
		switch {
		case err != nil:
			// Unreachable, or the lease ended: the lease deadline decides.
		case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev:
			h.lose(fmt.Errorf("%w: the etcd key of revision %d is gone", dlock.ErrOwnershipLost, h.rev))
			return
		default:
			from = resp.Header.Revision + 1
		}
	}
}

// follow watches the hold's key from revision from until someone else
// deletes it (it returns true), the watch ends, ls ends or the hold ends.
func (h *hold) follow(ctx context.Context, ls *lease, from int64) (deleted bool) {
	wch := h.l.cli.Watch(ctx, h.name, clientv3.WithRev(from), clientv3.WithFilterPut())
	for {
		select {
		case <-h.stop:
			return false
		case <-ls.done:
			return false
		case resp, ok := <-wch:
			if !ok || resp.Canceled {
				return false
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE && !h.deletedByRelease() {
					return true
				}
			}
		}
	}
}
