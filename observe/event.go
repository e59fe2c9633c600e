package observe

import (
	"fmt"
	"time"
)

// Kind says what happened.
type Kind uint8

// The kinds of events.
const (
	// Acquire: a TryLock or Lock call ended; its Outcome says how. Calls
	// refused before they reach the store (bad input, a closed Locker, a
	// key the Locker holds already without owner) fire none.
	Acquire Kind = iota + 1
	// Release: a hold was released, by Unlock or by Close.
	Release
	// Renew: the watchdog renewed a hold (Err is nil), or could not (Err
	// says why).
	Renew
	// Lost: a hold ended other than by its release; Err says why.
	Lost
	// Wake: a waiting Lock was woken by a release, before its next
	// attempt; with Handoff the release handed it the lock.
	Wake
	// Wait: a Lock found the lock busy and waits for it. It comes once per
	// call, before the call's Wake events and its Acquire (whose Blocked
	// is then true).
	Wait
)

var kindNames = [...]string{"", "acquire", "release", "renew", "lost", "wake", "wait"}

// String returns the kind's name: "acquire", "release", "renew", "lost",
// "wake" or "wait".
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Outcome is how an acquisition ended.
type Outcome uint8

// The outcomes of an acquisition.
const (
	// Acquired: the call returned the lock.
	Acquired Outcome = iota + 1
	// Busy: a single attempt (TryLock, or Lock with WithWait(0)) found the
	// lock held.
	Busy
	// Timeout: a waiting Lock stopped waiting without the lock: its
	// WithWait limit passed, its retry strategy gave up, or its context
	// ended.
	Timeout
	// Failed: the call failed otherwise: the store could not be reached,
	// it refused the command, the Locker was closed while the call ran.
	// Its name is "error".
	Failed
)

var outcomeNames = [...]string{"", "acquired", "busy", "timeout", "error"}

// String returns the outcome's name: "acquired", "busy", "timeout" or
// "error".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// Event is one thing that happened to a lock. Fields that do not apply to
// the event's Kind are zero.
type Event struct {
	Kind Kind
	// Backend names the driver: "redis" (redislock), "redlock", "etcd" or
	// "postgres".
	Backend string
	// Key is the key as the caller named it, without the Locker's prefix.
	Key string
	// Owner is the owner of the acquisition (see dlock.WithOwner), "" for
	// none.
	Owner string
	// Lock is the hold the event is about: for an Acquire only when the
	// outcome is Acquired; nil for a Wait and a Wake.
	Lock Hold
	// Outcome is how an Acquire ended.
	Outcome Outcome
	// Waited is, for an Acquire, the time from the call to its end; for a
	// Wake or a Wait, the time from the call to the event.
	Waited time.Duration
	// Blocked says, for an Acquire, that the call found the lock busy and
	// waited: it fired a Wait event before.
	Blocked bool
	// Attempts counts the attempts an Acquire made: requests that asked
	// the store for the lock. A hand-off is not an attempt of its own.
	Attempts int
	// Handoff says, for an Acquire or a Wake, that the releasing holder
	// handed the lock to this waiter (Redis); otherwise the lock was taken
	// fresh by an attempt.
	Handoff bool
	// Fence is the hold's fencing token (an Acquire with outcome Acquired,
	// a Renew, a Release, a Lost), 0 when the hold has none.
	Fence uint64
	// Held is, for a Release or a Lost, how long the hold lasted, from the
	// moment it was acquired.
	Held time.Duration
	// Err is why an Acquire did not acquire; why a Renew failed (nil when
	// it renewed); why a hold was Lost (the cause in its *dlock.LostError:
	// matching dlock.ErrOwnershipLost or dlock.ErrLeaseExpired); for a
	// Release, nil, or an error matching dlock.ErrClosed when Close
	// released the hold.
	Err error
}
