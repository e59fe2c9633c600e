package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// UnlockAfter lets the lock lapse d from now instead of deleting it (see
// [driver.Lapser]): a token-checked PEXPIRE of d, rounded up to a whole
// millisecond, on every node at once, in one round trip (lapse.lua). An
// owner's lock lapses at d when this is the owner's only hold on it, as
// the locks of dlock.LockAll are; with other holds of the owner it keeps
// a longer lease, which they need. The watchdog stops renewing the lock
// first.
//
// It succeeds when a majority applied it: each of them keeps the key
// until at least d after the call began, so no other party can hold a
// majority before then, and the handle ends as released. When so many
// nodes no longer have the lock that no majority can, the lock was lost,
// and UnlockAfter returns the *dlock.LostError. Otherwise too few nodes
// answered to know (an error matching ErrNoQuorum): the handle stays
// held, no longer renewed, and ends as released at the shorter of its
// lease and d, when the key lapses whatever the nodes did.
//
// A renewal already on the wire may land on a node after the PEXPIRE:
// that node then keeps the key a full TTL from that renewal, never less
// than d. A node that had not answered the acquisition yet, and takes
// the lock after the PEXPIRE, keeps it for the TTL: a minority, which
// holds no other party back once d has passed. A d of zero or less is
// Unlock.
func (lk *hold) UnlockAfter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return lk.Unlock(ctx)
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	done, err := lk.releasing()
	if err != nil {
		return err
	}
	defer done()
	l := lk.l
	send := func(ctx context.Context, nd *node) reply {
		v, err := lapseScript.Run(ctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner(), lk.leaseArg(ms)).Int64()
		return reply{n: v, err: err}
	}
	sent := time.Now()
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(lk.ttl), send, l.decided, nil)
	rd.settle(false)
	t := l.tally(got)
	switch {
	case t.ours >= l.quorum:
		lk.end(dlock.ErrNotHeld)
		return nil
	case t.gone+t.taken > len(l.nodes)-l.quorum:
		return lk.lose(dlock.ErrOwnershipLost)
	}
	// Some nodes may have applied it: the lease is the shorter of the two,
	// where the watchdog ends the handle as released (it renews it no
	// more).
	l.watchdog.Refreshed(lk, sent, d, false)
	return l.noQuorum("unlock", lk.Key(), t.ours+t.gone+t.taken, t.errs)
}
