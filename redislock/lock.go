package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
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

// The states of a lock handle.
const (
	statePending  int32 = iota // being acquired
	stateHeld                  // ours
	stateReleased              // given back by Unlock
	stateLost                  // lost: expired, taken, or unreachable past its deadline
)

// lock is the handle of one acquisition, the dlock.Lock of this driver.
type lock struct {
	l            *Locker
	key          string
	keys         keys
	token, owner string
	fence        uint64
	fenced       bool // the acquisition asked for a fence
	// ownerByOption: the owner came from dlock.WithOwner, not from ctx
	ownerByOption bool
	state         atomic.Int32
	below         *lock // the holder's previous hold in the Locker's table

	// The script arguments, boxed once: keys, token and owner.
	keyArgs            [5]any
	tokenArg, ownerArg any

	unlockMu sync.Mutex // serialises Unlock, so that a second Unlock sees the first
	unknown  bool       // a release was sent whose outcome is unknown; under unlockMu

	mu   sync.Mutex // guards err and done
	err  error
	done chan struct{}

	// Guarded by l.watchdog.mu: the lease and the watchdog's schedule.
	ttl       time.Duration
	renew     bool
	deadline  time.Time // local lease deadline, on the monotonic clock
	due       time.Time // next time the watchdog looks at this lock
	index     int       // in the watchdog's heap; -1 when not there
	inflight  bool      // a renewal is on the wire
	renewNow  bool      // the lease is a waiter's short grant: renew it early
	renewArgs []any     // the renewal command, for renewTTL
	renewTTL  time.Duration
	lastErr   error  // why the last renewal failed
	gen       uint64 // the lease's generation: Refresh starts a new one
	releasing bool   // Unlock began: renewal stops, and the handle ends as released at its deadline
}

var _ dlock.Lock = (*lock)(nil)

// closedChan is returned by Done for a handle that ended before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// drift is the clock-drift margin taken off every lease: the local deadline
// of a lease of ttl that was requested at time t is t + ttl - drift(ttl),
// where t is read on the monotonic clock before the command is sent. Redis
// cannot expire the key before that moment unless its clock runs more than
// 1% fast.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

func (lk *lock) setDeadline(sent time.Time, ttl time.Duration) {
	lk.deadline = sent.Add(ttl - drift(ttl))
}

// leaseKeys are the keys of refresh.lua and ttl.lua: the lock and its holds.
func (lk *lock) leaseKeys() []any { return []any{lk.keyArgs[0], lk.keyArgs[2]} }

func (lk *lock) pending() bool { return lk.state.Load() == statePending }

// Key returns the key the caller asked for.
func (lk *lock) Key() string { return lk.key }

// Token returns the random value that identifies this acquisition.
func (lk *lock) Token() string { return lk.token }

// Fence returns the fencing token of this acquisition.
func (lk *lock) Fence() uint64 { return lk.fence }

// Done returns a channel closed when the lock is released or lost.
func (lk *lock) Done() <-chan struct{} {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.done == nil {
		if lk.err != nil {
			return closedChan
		}
		lk.done = make(chan struct{})
	}
	return lk.done
}

// Err returns nil while the lock is held, then why it ended.
func (lk *lock) Err() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.err
}

// end moves the handle to a final state once: it takes the lock out of the
// watchdog and the Locker's table, says so in the log (before Done closes,
// so that a watcher of Done finds the entry) and closes Done. It reports
// whether this call ended it.
func (lk *lock) end(state int32, err error) bool {
	if lk.Err() != nil {
		return false
	}
	// Out of the watchdog and the table first: whoever sees Done closed
	// finds the key free in this Locker. (Both are idempotent, should two
	// ends race.)
	lk.l.watchdog.remove(lk)
	lk.l.forget(lk)
	lk.mu.Lock()
	if lk.err != nil {
		lk.mu.Unlock()
		return false
	}
	lk.err = err
	lk.state.Store(state)
	if log := lk.l.log; state == stateLost {
		log.Warn("lock lost", "key", lk.key, "fence", lk.fence, "reason", errors.Unwrap(err))
	} else if log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug("released", "key", lk.key, "fence", lk.fence)
	}
	if lk.done != nil {
		close(lk.done)
	}
	lk.mu.Unlock()
	return true
}

// lose ends the handle as lost for cause, and returns the *dlock.LostError.
func (lk *lock) lose(cause error) error {
	lk.end(stateLost, &dlock.LostError{Key: lk.key, Err: cause})
	return lk.Err()
}

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
// the new holder came after it. Otherwise the lock was lost.
//
// Once Unlock is called the watchdog no longer renews the lock, whatever
// the outcome: a release that fails lets the lease lapse at its deadline
// at the latest, when the handle ends as released.
//
// Unlocking twice returns dlock.ErrNotHeld; unlocking a lost lock returns
// the *dlock.LostError.
func (lk *lock) Unlock(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	switch lk.state.Load() {
	case stateReleased:
		return &dlock.KeyError{Key: lk.key, Err: dlock.ErrNotHeld}
	case stateLost:
		return lk.Err()
	}
	lk.l.watchdog.releasing(lk)
	var release *redis.Cmd
	if lk.owner == "" {
		release = releaseScript.run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg)
	} else {
		release = releaseScript.run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg, lk.ownerArg, "0")
	}
	n, err := release.Int64()
	if err != nil {
		lk.unknown = true
		return &dlock.KeyError{Op: "unlock", Key: lk.key, Err: err}
	}
	inLease := time.Now().Before(lk.l.watchdog.deadline(lk))
	switch {
	case n == releaseDone,
		n == releaseGone && inLease,
		n == releaseTaken && inLease && lk.unknown:
		lk.end(stateReleased, dlock.ErrNotHeld)
		return nil
	case n == releaseGone || n == releaseTaken:
		return lk.lose(dlock.ErrOwnershipLost)
	}
	return &dlock.KeyError{Op: "unlock", Key: lk.key, Err: fmt.Errorf("unexpected reply %d", n)}
}

// closeRelease is Close's release of lk: it ends the handle first, so
// that the work it guards is told to stop before another party can take
// the key, and then deletes it. A delete that fails leaves a lease that
// nothing renews, which lapses at its TTL.
func (lk *lock) closeRelease(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if lk.state.Load() != stateHeld {
		return nil
	}
	lk.end(stateReleased, errReleasedByClose)
	args := []any{lk.tokenArg, lk.ownerArg, "0"}
	if lk.owner == "" {
		args = args[:1]
	}
	if err := releaseScript.run(ctx, lk.l.send, lk.keyArgs[:], args...).Err(); err != nil {
		return &dlock.KeyError{Op: "unlock", Key: lk.key, Err: err}
	}
	return nil
}

func (lk *lock) check() error {
	switch lk.state.Load() {
	case stateReleased:
		return &dlock.KeyError{Key: lk.key, Err: dlock.ErrNotHeld}
	case stateLost:
		return lk.Err()
	}
	return nil
}

// Refresh sets the remaining lease to ttl (for an owner's lock: extends the
// shared lease to at least ttl) and makes ttl the lease the watchdog renews
// from now on.
func (lk *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl < dlock.MinTTL {
		return &dlock.KeyError{Op: "refresh", Key: lk.key, Err: fmt.Errorf("%w: %v is below %v", dlock.ErrInvalidTTL, ttl, dlock.MinTTL)}
	}
	if err := lk.check(); err != nil {
		return err
	}
	sent := time.Now()
	n, err := refreshScript.run(ctx, lk.l.send, lk.leaseKeys(), lk.tokenArg, lk.ownerArg, ttl.Milliseconds()).Int64()
	if err != nil {
		// Redis may have applied it: the lease is the shorter of the two.
		lk.l.watchdog.refreshed(lk, sent, ttl, false)
		return &dlock.KeyError{Op: "refresh", Key: lk.key, Err: err}
	}
	if n == 0 {
		return lk.lose(dlock.ErrOwnershipLost)
	}
	lk.l.watchdog.refreshed(lk, sent, ttl, true)
	return nil
}

// TTL returns the remaining lease as Redis sees it.
func (lk *lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := lk.check(); err != nil {
		return 0, err
	}
	n, err := ttlScript.run(ctx, lk.l.send, lk.leaseKeys(), lk.tokenArg, lk.ownerArg).Int64()
	if err != nil {
		return 0, &dlock.KeyError{Op: "ttl", Key: lk.key, Err: err}
	}
	if n < 0 {
		return 0, lk.lose(dlock.ErrOwnershipLost)
	}
	return time.Duration(n) * time.Millisecond, nil
}
