package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// forget deletes the etcd key name, which a write whose reply was lost may
// have put on ls, or which a waiter leaves: by its unique name, so that a
// grant that arrives after the caller gave up is given back; in the
// background when etcd does not answer, for on a lease that lives on the
// key would hold the lock for nobody. A lost lease is no longer kept
// alive: its keys go with it. The delete ends with ctx while ctx lives,
// or after releaseTimeout.
func (l *Locker) forget(ctx context.Context, name string, ls *lease) {
	switch {
	case ls.lost():
	case ctx.Err() != nil && ls.renew:
		l.deleteLater(name, ls, nil) // the caller's time is up: do not make it wait
	default:
		if ctx.Err() != nil {
			ctx = context.WithoutCancel(ctx)
		}
		rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
		l.deleting.add(name)
		if _, derr := l.cli.Delete(rctx, name); derr != nil && ls.renew {
			ls.retire(name) // that delete may land after a later hold took the name
			l.deleteLater(name, ls, ls.pause())
		}
		l.deleting.done(name)
		cancel()
	}
}

// deleteLater deletes, in the background, the etcd key name on the
// renewed lease ls, which an attempt whose caller gave up may have
// written, or which a delete or a release that etcd did not answer left:
// on a lease that lives on, the key would hold the lock for nobody. Once a
// delete failed (resume, from ls.pause, is not nil), the lease is not
// renewed until the delete lands, so the key is gone within the lease's
// TTL either way; a first try that etcd answers pauses nothing, so that
// callers who give up while etcd is well never hold back the session's
// renewal. It tries after 100ms (a write cut short may still land), then
// less and less often, until etcd answers, the lease ends (and the key
// with it), or the Locker closes (which revokes its leases).
func (l *Locker) deleteLater(name string, ls *lease, resume func()) {
	l.deleting.add(name) // not reused until the delete lands
	l.wg.Go(func() {
		defer l.deleting.done(name)
		defer func() {
			if resume != nil {
				resume()
			}
		}()
		delay := 100 * time.Millisecond
		t := time.NewTimer(delay)
		defer t.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-ls.done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(l.ctx, releaseTimeout)
			_, err := l.cli.Delete(ctx, name)
			cancel()
			if err == nil {
				return
			}
			if resume == nil {
				resume = ls.pause()
			}
			delay = min(2*delay, 2*time.Second)
			t.Reset(delay)
		}
	})
}

// revokeLater revokes, in the background, the lease ls, which is no longer
// kept alive and holds a key that a release could not delete: the key
// lapses with the lease within its TTL, or sooner when a revoke reaches
// etcd. It retries as deleteLater does, for at most the lease's TTL, or
// until the Locker closes.
func (l *Locker) revokeLater(ls *lease) {
	ctx, cancel := context.WithTimeout(l.ctx, ls.ttl)
	l.wg.Go(func() {
		defer cancel()
		delay := 100 * time.Millisecond
		t := time.NewTimer(0) // at once: the caller did not wait for it
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, releaseTimeout)
			_, err := l.cli.Revoke(rctx, ls.id)
			rcancel()
			if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return
			}
			delay = min(2*delay, 2*time.Second)
			t.Reset(delay)
		}
	})
}
