package redislock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// The life of a hold.
//
//	pending ──acquired──▶ held ──Unlock (released or found gone in its lease)──▶ released
//	   │                   │  └──renewal refused, deadline passed, release found it taken──▶ lost
//	   └──busy, error, Close──▶ (no handle)
//
// A handle moves once, from held to released or lost (end), and Done
// closes then. The rule every path keeps: while a handle reports held,
// Redis keeps the lock at least until the handle's local deadline,
// whatever became of each command (a success, an error reply, a timeout, a
// reply that never came, a command go-redis sent twice):
//
//   - the deadline is counted from the moment before the command that set
//     the lease was sent, less drift: a late reply cannot lengthen it;
//   - a renewal lengthens it only if no Refresh came since it was sent
//     (a lease generation), and a Refresh whose outcome is unknown can only
//     shorten it;
//   - a handle whose renewals fail is declared lost at the deadline, by the
//     watchdog's clock, not by the goroutine that waits on the network;
//   - every command is safe to send twice: an attempt that finds its own
//     token has the lock, a release that finds the hold gone within the
//     lease has released it;
//   - once Unlock began, nothing renews the lock, so a release of unknown
//     outcome lets the lease lapse by the deadline, when the handle ends
//     as released;
//   - Close decides under the table's mutex: an acquisition is either in
//     the table, and released by Close, or gives the lock back.
//
// And its dual: a hold that ends other than by its own Unlock ends the work
// done under it (dlock.Guard and dlock.Do watch Done).

// hold is the handle of one acquisition, the dlock.Lock of this driver.
type hold struct {
	driver.Lease // the lease, as the watchdog keeps it: first (see driver.Lease)
	driver.Hold  // the key, the owner, the state, Done and Err
	l            *Locker
	keys         redisnode.Keys
	owner        string        // the owner, as Owner() returns it; ownerArg points here
	fenced       bool          // the acquisition asked for a fence
	limit        int32         // a permit's semaphore limit, for its attempts
	renew        bool          // the watchdog renews it
	ack          replicaAck    // what its writes ask of the replicas
	ttl          time.Duration // the lease asked for
	deadline     time.Time     // the local deadline when acquired (or granted)

	// The script arguments, boxed once: keys, token and owner, as pointers
	// to lk's own strings.
	keyArgs            [6]any
	tokenArg, ownerArg any

	unlockMu sync.Mutex // serialises Unlock, so that a second Unlock sees the first
	unknown  bool       // a release was sent whose outcome is unknown; under unlockMu

	// The renewal command, built once per lease length (see renewal); the
	// watchdog's renewer alone uses them.
	renewArgs []any
	renewTTL  time.Duration
}

var (
	_ dlock.Lock        = (*hold)(nil)
	_ driver.Lapser     = (*hold)(nil)
	_ driver.Downgrader = (*hold)(nil)
)

// setDeadline sets the local deadline of a lease of ttl that the command
// sent at sent set, before the lock is watched.
func (lk *hold) setDeadline(sent time.Time, ttl time.Duration) {
	lk.deadline = redisnode.Drift.Deadline(sent, ttl)
}

// leaseKeys are the keys of refresh.lua and ttl.lua: the lock and its
// holds. A plain lock has no holds key, and the scripts do not touch it:
// the lock key stands in for it, for a Cluster slot that is migrating
// refuses (TRYAGAIN) a command whose keys are not all there.
func (lk *hold) leaseKeys() []any {
	if lk.Owner() == "" && lk.Kind() == driver.HoldLock {
		return []any{lk.keyArgs[0], lk.keyArgs[0]}
	}
	return []any{lk.keyArgs[0], lk.keyArgs[2]}
}

// end ends the handle once; see driver.Table.End.
func (lk *hold) end(err error) bool { return lk.table().End(lk, err) }

// lose ends the handle as lost for cause, and returns its Err.
func (lk *hold) lose(cause error) error { return lk.table().Lose(lk, cause) }

// Unlock releases the lock in one round trip.
//
// Every release can be sent twice (go-redis re-sends a command after a
// read timeout) or retried by the caller after its reply was lost, so a
// release that finds the hold gone is told apart from a lost lock by the
// local lease deadline: before it, the key cannot have expired, so an
// earlier release of ours deleted it (or an operator did; either way the
// lock is free) and Unlock returns nil. A retry that finds another party
// holding the key before the deadline returns nil too when an earlier
// release of this handle had an unknown outcome: that release ran, and
// the new holder came after it.
//
// Once Unlock is called the watchdog no longer renews the lock, whatever
// the outcome: a release that fails lets the lease lapse at its deadline
// at the latest, when the handle ends as released; and a release that
// reaches Redis after the deadline, finding the key gone or taken since,
// is a release too (Unlock returns nil). Only an Unlock that began after
// the deadline finds the lock lost.
//
// Unlocking twice returns dlock.ErrNotHeld; unlocking a lost lock returns
// the *dlock.LostError.
func (lk *hold) Unlock(ctx context.Context) error {
	if lk.Kind() != driver.HoldLock {
		return lk.unlockHold(ctx)
	}
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	began := time.Now()
	if err := lk.releasing(); err != nil {
		return err
	}
	var release *redis.Cmd
	if lk.Owner() == "" {
		release = releaseScript.Run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg)
	} else {
		release = releaseScript.Run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg, lk.ownerArg, "0")
	}
	n, err := release.Int64()
	if err != nil {
		lk.unknown = true
		return lk.Wrap("unlock", err)
	}
	return lk.released(n, began)
}

// released ends lk after a release begun at began, which release.lua
// answered n, and returns Unlock's error. The caller holds lk.unlockMu.
func (lk *hold) released(n int64, began time.Time) error {
	deadline := lk.l.watchdog.Deadline(lk)
	inLease := time.Now().Before(deadline)
	switch {
	case n == releaseDone,
		n == releaseGone && inLease,
		n == releaseTaken && inLease && lk.unknown,
		(n == releaseGone || n == releaseTaken) && !inLease && began.Before(deadline):
		// the last case: the lease lapsed while the release was on its
		// way, which is a release too, for renewal stopped when Unlock
		// began (another party may hold the key since the deadline)
		lk.end(dlock.ErrNotHeld)
		return nil
	case n == releaseGone || n == releaseTaken:
		return lk.lose(dlock.ErrOwnershipLost)
	}
	return lk.Wrap("unlock", fmt.Errorf("unexpected reply %d", n))
}

// releasing begins a release of lk: it checks that lk is held and stops
// its renewals (a renewal in flight ends first). The caller holds
// lk.unlockMu.
func (lk *hold) releasing() error {
	if err := lk.Check("unlock"); err != nil {
		return err
	}
	if err := lk.l.watchdog.Releasing(lk); err != nil {
		return lk.lose(err)
	}
	return nil
}

// closeRelease is Close's release of lk: it ends the handle first, so
// that the work it guards is told to stop before another party can take
// the key, and then deletes it. A delete that fails leaves a lease that
// nothing renews, which lapses at its TTL.
func (lk *hold) closeRelease(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if lk.State() != driver.Held {
		return nil
	}
	lk.end(driver.ErrReleasedByClose)
	return lk.Wrap("unlock", lk.store().release.Run(ctx, lk.l.send, lk.keyArgs[:], lk.args(nil, "0")...).Err())
}

// Refresh sets the remaining lease to ttl (for an owner's lock: extends the
// shared lease to at least ttl) and makes ttl the lease the watchdog renews
// from now on. With replica acknowledgement, a Refresh that too few
// replicas acknowledged returns ErrNotReplicated, and the lease the holder
// counts on is the shorter of the old one and the new.
func (lk *hold) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl < dlock.MinTTL {
		return lk.Wrap("refresh", fmt.Errorf("%w: %v is below %v", dlock.ErrInvalidTTL, ttl, dlock.MinTTL))
	}
	if err := lk.Check("refresh"); err != nil {
		return err
	}
	sent := time.Now()
	p, ack := lk.l.send, (*acker)(nil)
	if lk.ack.n > 0 {
		ack = &acker{client: lk.l.client, ack: lk.ack}
		p = ack
	}
	n, err := refreshScript.Run(ctx, p, lk.leaseKeys(), lk.tokenArg, lk.ownerArg, lk.leaseArg(ttl)).Int64()
	if err == nil && n != 0 && ack != nil {
		err = ack.check() // applied, but not where a failover would keep it
	}
	if err != nil {
		// Redis may have applied it: the lease is the shorter of the two.
		lk.l.watchdog.Refreshed(lk, sent, ttl, false)
		return lk.Wrap("refresh", err)
	}
	if n == 0 {
		return lk.lose(dlock.ErrOwnershipLost)
	}
	lk.l.watchdog.Refreshed(lk, sent, ttl, true)
	return nil
}

// TTL returns the remaining lease as Redis sees it.
func (lk *hold) TTL(ctx context.Context) (time.Duration, error) {
	if err := lk.Check("ttl"); err != nil {
		return 0, err
	}
	n, err := lk.store().ttl.Run(ctx, lk.l.send, lk.leaseKeys(), lk.args(nil)...).Int64()
	if err != nil {
		return 0, lk.Wrap("ttl", err)
	}
	if n < 0 {
		return 0, lk.lose(dlock.ErrOwnershipLost)
	}
	return time.Duration(n) * time.Millisecond, nil
}
