package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.Lapser = (*hold)(nil)

// UnlockAfter lets the lock lapse d from now (rounded up to whole
// seconds) instead of deleting it: it grants a lease of d that nobody
// renews and moves the hold's key onto it, in a transaction that compares
// the key's create revision, so the fence stays. See [driver.Lapser].
//
// When the move's outcome is unknown (etcd did not answer), the hold ends
// all the same: the key is deleted if it is still on its old lease (an
// early release rather than a key left on a lease that is kept alive), or
// lapses with the new one.
func (h *hold) UnlockAfter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return h.Unlock(ctx)
	}
	if err := h.Check("unlock"); err != nil {
		return err
	}
	ttl, err := wholeSeconds(max(d, time.Second))
	if err != nil {
		return h.Wrap("unlock", err)
	}
	g, err := h.l.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return h.Wrap("unlock", err)
	}
	old := h.currentLease()
	h.mu.Lock()
	h.releasing++ // the watch leaves a delete of the key to us
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.releasing--
		h.mu.Unlock()
	}()
	move := []clientv3.Op{clientv3.OpPut(h.name, h.value(), clientv3.WithLease(g.ID))}
	if h.qname != "" {
		// The next waiter, which watches the hold's key in the line,
		// waits for the holds' range to empty instead.
		move = append(move, clientv3.OpDelete(h.qname))
	}
	resp, err := h.l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)).
		Then(move...).Commit()
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		h.l.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev),
				clientv3.Compare(clientv3.LeaseValue(h.name), "=", old.id)).
			Then(clientv3.OpDelete(h.name)).Commit()
		cancel()
		if h.end(dlock.ErrNotHeld) {
			h.leaveLine()
		}
		return h.Wrap("unlock", err)
	}
	if !resp.Succeeded {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		h.l.cli.Revoke(rctx, g.ID)
		cancel()
		h.lose(fmt.Errorf("%w: etcd key %q is gone", dlock.ErrOwnershipLost, h.name))
		return h.Err()
	}
	// The key left the old lease: ending the hold revokes a lease of its
	// own without touching the key, and leaves a shared one to its session.
	h.end(dlock.ErrNotHeld)
	return nil
}
