package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// UnlockAfter lets the lock lapse d from now instead of deleting it: one
// round trip, a token-checked PEXPIRE (lapse.lua). See [driver.Lapser].
// A lock taken with an owner lapses d from now too, unless the owner has
// other holds of it, whose lease it keeps.
// A hold of a semaphore or a read-write lock lapses the same way: its
// member's score (the end of its lease) becomes now + d, so the store
// counts it until then, and the set and its holds live at least as long;
// the next script that touches the key after d drops it.
//
// The watchdog stops renewing the lock first; a renewal already on the
// wire may land after the PEXPIRE, and then the lock lapses a full TTL
// from that renewal instead: later than d when d is below the TTL, sooner
// when d is above it. A d below a millisecond is Unlock.
func (lk *hold) UnlockAfter(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		return lk.Unlock(ctx)
	}
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if err := lk.releasing(); err != nil {
		return err
	}
	sent := time.Now()
	n, err := lapseScript.Run(ctx, lk.l.send, lk.leaseKeys(), lk.tokenArg, lk.ownerArg, lk.leaseArg(d)).Int64()
	if err != nil {
		// Redis may have set the lease to d: the local deadline becomes
		// the shorter of the two, where the watchdog ends the handle as
		// released, for it renews it no more.
		lk.l.watchdog.Refreshed(lk, sent, d, false)
		return lk.Wrap("unlock", err)
	}
	if n == 0 {
		return lk.lose(dlock.ErrOwnershipLost)
	}
	lk.end(dlock.ErrNotHeld)
	return nil
}
