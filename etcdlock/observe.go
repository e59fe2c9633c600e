package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// onRenew returns the hook by which a renewed lease reports its
// keep-alives to the Locker's observer, or nil when it has none.
func (l *Locker) onRenew() func(*lease, error) {
	if !l.tables.Locks.Observed() {
		return nil
	}
	return l.renewed
}

// renewed reports a keep-alive of ls as a renewal of each hold on it: a
// shared lease carries many.
func (l *Locker) renewed(ls *lease, err error) {
	for _, t := range l.tables.All() {
		for _, h := range t.Held() {
			if h.currentLease() == ls {
				t.Renewed(h, err)
			}
		}
	}
}

// observe reports the outcome of a keep-alive that its keeper sent, unless
// the keeper was stopped meanwhile.
func (ls *lease) observe(ctx context.Context, resp *clientv3.LeaseKeepAliveResponse, err error) {
	if ls.renewed == nil || ctx.Err() != nil {
		return
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && resp.TTL <= 0 {
		err = fmt.Errorf("%w: etcd no longer has lease %x", dlock.ErrOwnershipLost, int64(ls.id))
	}
	ls.renewed(ls, err)
}
