package etcdlock

import (
	"context"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiting Lock waits in line, so that a release wakes one waiter, not
// all of them. The line of lock key K is the etcd range
// "<prefix>/wait/<K>/" (K escaped as for the holds), beside the holds'
// range: each waiter puts a key "<prefix>/wait/<K>/<token>" there, on its
// session, whose value is its owner id, and the keys form a line ordered
// by create revision. The holds' range keeps holds alone, so that Inspect,
// List, ForceUnlock and TryLock read it as before.
//
// A waiter watches the delete of the key just ahead of it in the line, or,
// first in line, the deletes in the holds' range. Then one transaction
// takes the lock if the waiter is first in line and the holds' range is
// empty; a waiter keeps its key in the line while it holds the lock, and
// its release deletes both, so that the delete the next waiter watches is
// the release itself. A release so wakes the next waiter alone, whatever
// the number of waiters: each waiting Lock costs five round trips (join
// the line, watch, take, stop watching, release), as etcd's
// concurrency.Mutex, which orders its waiters the same way, costs about as
// many.
//
// An owner whose holds are all that the holds' range holds joins them at
// once, ahead of the line, as TryLock would: a reentrant hold must not
// wait behind a waiter that waits for the owner. TryLock, a Lock with a
// pinned lease (dlock.WithLease, whose time would run out in line) and a
// Lock without notification (dlock.WithNotify(false)) take a free lock
// without joining the line, so waiters are served in order except for
// them; exclusion never depends on the line, only on the transactions'
// conditions on the holds' range. Semaphores and read-write locks keep
// their own queue (see queue.go): a permit or a reader is admitted by a
// count of the keys ahead of it, not by one predecessor.

// lineOf is the etcd range of the line of key's lock.
func (l *Locker) lineOf(key string) string {
	return l.opts.Prefix + "/wait/" + escape(key) + "/"
}

// inLine is a waiting Lock of c with the renewed lease ls: it joins the
// line and waits for its turn (see above). Each request is made with actx,
// which ends with the call's limit.
func (l *Locker) inLine(ctx, actx context.Context, c call, h *hold, ls *lease) (dlock.Lock, error) {
	var (
		retry   = driver.NewBackoff(c.opts.Retry)
		b       busy
		lastErr error
		watched string // the key or range watched; "" for none
		watch   clientv3.WatchChan
		stop    = func() {}
		waiting bool
	)
	defer func() { stop() }()
	limit, stopLimit := c.waitLimit(true)
	defer stopLimit()
	p, q := l.rangeOf(c.key), l.lineOf(c.key)
	pEnd, qEnd := clientv3.GetPrefixRangeEnd(p), clientv3.GetPrefixRangeEnd(q)
	token := l.tokenFor(c, ls, p, q)
	name, qname := p+token, q+token
	var qrev int64 // the create revision of our key in the line; 0: not in line
	// leave takes our key out of the line, when it is there, and returns
	// the error of a call that gives up.
	leave := func(cause error) error {
		if qrev != 0 {
			cctx := ctx
			if cause == nil {
				// The wait ran out: withdrawing and the retry-after hint
				// have one request timeout between them.
				var cancel context.CancelFunc
				cctx, cancel = context.WithTimeout(ctx, RequestTimeout)
				defer cancel()
			}
			l.forget(cctx, qname, ls)
		}
		if lastErr != nil && cause == nil {
			return driver.Wrap("lock", c.key, lastErr)
		}
		return l.notAcquired(context.WithoutCancel(ctx), c, b, cause)
	}
	put := clientv3.OpPut(name, c.owner, clientv3.WithLease(ls.id))
	readHolds := clientv3.OpGet(p, clientv3.WithRange(pEnd), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	for {
		h.tbl.Attempted(h)
		// A name whose delete is pending after a failed attempt is not
		// written again: the delete, landing later, would take it.
		if l.deleting.any(name) {
			token = driver.NewToken()
			name = p + token
			put = clientv3.OpPut(name, c.owner, clientv3.WithLease(ls.id))
		}
		if qrev == 0 && l.deleting.any(qname) {
			qname = q + driver.NewToken()
		}
		var (
			mine bool // our owner holds the lock alone
			txn  clientv3.Txn
		)
		switch {
		case qrev == 0:
			// Take the lock when it is free and nobody waits, else join
			// the line: read the holds and the two last keys of the line,
			// ours and the one ahead of it.
			txn = l.cli.Txn(actx).
				If(clientv3.Compare(clientv3.Version(p), "=", 0).WithRange(pEnd),
					clientv3.Compare(clientv3.Version(q), "=", 0).WithRange(qEnd)).
				Then(put).
				Else(clientv3.OpPut(qname, c.owner, clientv3.WithLease(ls.id)), readHolds,
					clientv3.OpGet(q, clientv3.WithRange(qEnd), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)))
		default:
			readLine := clientv3.OpGet(q, clientv3.WithRange(qEnd), clientv3.WithMaxCreateRev(qrev),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))
			inLine := clientv3.Compare(clientv3.CreateRevision(qname), "=", qrev)
			mine = c.owner != "" && len(b.holds) > 0 && !slices.ContainsFunc(b.holds, func(kv *mvccpb.KeyValue) bool { return string(kv.Value) != c.owner })
			if mine {
				// Join our owner's holds, if nothing was written to them
				// since we read them, and leave the line.
				txn = l.cli.Txn(actx).
					If(clientv3.Compare(clientv3.ModRevision(p), "<", b.rev+1).WithRange(pEnd), inLine).
					Then(put, clientv3.OpDelete(qname)).
					Else(readHolds, readLine)
			} else {
				// First in line, and free: take it.
				txn = l.cli.Txn(actx).
					If(clientv3.Compare(clientv3.Version(p), "=", 0).WithRange(pEnd), inLine,
						clientv3.Compare(clientv3.CreateRevision(q), ">", qrev-1).WithRange(qEnd)).
					Then(put).
					Else(readHolds, readLine)
			}
		}
		resp, err := txn.Commit()
		switch {
		case err != nil:
			// Its outcome is unknown: our hold may be there, and our key
			// in the line; delete both and join again.
			l.forget(actx, name, ls)
			if qrev == 0 || mine {
				l.forget(actx, qname, ls)
				qrev = 0
			}
			if e := l.failed(ctx, actx, c, ls, b, err, true); e != nil {
				if qrev != 0 {
					l.forget(actx, qname, ls)
				}
				return nil, e
			}
			lastErr = err
			// The wake-up that led here is spent: try again after the
			// retry delay, not at the next event, which may never come.
			stop()
			watch, watched = nil, ""
		case resp.Succeeded:
			h.token, h.name, h.rev, h.fence = token, name, resp.Header.Revision, resp.Header.Revision
			h.named = ls
			if qrev != 0 && !mine {
				h.qname, h.qls = qname, ls
			}
			h.setLease(ls)
			if err := h.tbl.Add(h); err != nil { // closed: give it back
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				l.cli.Txn(rctx).Then(clientv3.OpDelete(name), clientv3.OpDelete(qname)).Commit()
				cancel()
				return nil, err
			}
			h.attach(ls)
			return h, nil
		default:
			lastErr = nil
			rs := resp.Responses
			if qrev == 0 {
				qrev, rs = resp.Header.Revision, rs[1:] // past our put
			}
			holds, line := rs[0].GetResponseRange().Kvs, rs[1].GetResponseRange().Kvs
			b = busy{rev: resp.Header.Revision, holds: holds}
			if len(holds) > 0 {
				b.lease = clientv3.LeaseID(holds[0].Lease)
			}
			target := ""
			switch {
			case len(line) == 0 || string(line[0].Key) != qname || line[0].CreateRevision != qrev:
				qrev = 0 // our key left the line (its lease ended, or an operator): join again
				continue
			case c.owner != "" && len(holds) > 0 && !slices.ContainsFunc(holds, func(kv *mvccpb.KeyValue) bool { return string(kv.Value) != c.owner }):
				continue // our owner's holds: join them
			case len(line) == 2:
				target = string(line[1].Key) // the key ahead of ours
			case len(holds) == 0:
				continue // first in line, and free: take it
			default:
				target = p // first in line: wait for the holds to go
			}
			if target != watched || watch == nil {
				stop()
				wctx, cancel := context.WithCancel(ctx)
				stop, watched = cancel, target
				if target == p {
					watch = l.cli.Watch(wctx, p, clientv3.WithRange(pEnd), clientv3.WithRev(b.rev+1), clientv3.WithFilterPut())
				} else {
					watch = l.cli.Watch(wctx, target, clientv3.WithRev(b.rev+1), clientv3.WithFilterPut())
				}
			}
		}
		if !waiting {
			h.tbl.Waiting(h)
			waiting = true
		}
		// Wait for the watch, or, without one (after a failed request),
		// for the retry delay. A live watch misses no delete: the retry
		// delay then only counts the strategy's attempts, and wakes
		// nothing, so that waiters do not poll all at once.
		for woken := false; !woken; {
			d, ok := retry.Next()
			if !ok {
				return nil, leave(nil)
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, leave(context.Cause(ctx))
			case <-limit:
				t.Stop()
				return nil, leave(nil)
			case <-ls.done:
				t.Stop()
				return nil, &dlock.NotAcquiredError{Key: c.key, Err: ls.err}
			case resp, ok := <-watch:
				t.Stop()
				if !ok || resp.Canceled || resp.Err() != nil {
					watch = nil // ended (compaction, no leader): read, then watch again
				} else {
					h.tbl.Woken(h, false)
				}
				woken = true
			case <-t.C:
				woken = watch == nil
			}
		}
	}
}

// leaveLine deletes the hold's key in the line, if it has one, after the
// hold ended other than by its release: the next waiter watches it.
func (h *hold) leaveLine() {
	if h.qname == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	h.l.forget(ctx, h.qname, h.qls)
}
