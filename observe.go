package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/internal/settings"
)

// An Observer watches what a Locker's locks do: every acquisition and how
// it ended, every release, renewal, loss and wake-up. Set one with
// [WithObserver]; package dlockotel (module
// github.com/dlock-go/dlock/dlockotel) turns the events into OpenTelemetry
// metrics and spans.
//
// Observe is called synchronously, on the goroutine where the event
// happened: the caller's for an acquisition, a release by Unlock and a
// wake-up, the Locker's own for a renewal and most losses. Its ctx is the
// acquiring call's context for Acquire, Wait and Wake events (a tracer
// finds the caller's span there), and context.Background for the events
// of a hold after its acquisition. It must return
// quickly, be safe for concurrent use, and must not call the Locker or the
// event's Lock (other than Key, Fence and Done), which may be in the middle
// of the call that fired the event.
//
// The events of one hold come in their order: an Acquire with outcome
// OutcomeAcquired, then Renew events, then one Release or Lost. A Lock
// that waits fires a Wait, then Wake events, before its Acquire.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc is a function that is an Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// EventKind says what happened.
type EventKind uint8

// The kinds of events.
const (
	// EventAcquire: a TryLock or Lock call ended; its Outcome says how.
	// Calls refused before they reach the store (bad input, a closed
	// Locker, a key the Locker holds already without owner) fire none.
	EventAcquire EventKind = iota + 1
	// EventRelease: a hold was released, by Unlock or by Close.
	EventRelease
	// EventRenew: the watchdog renewed a hold (Err is nil), or could not
	// (Err says why).
	EventRenew
	// EventLost: a hold ended other than by its release; Err says why.
	EventLost
	// EventWake: a waiting Lock was woken by a release, before its next
	// attempt; with Handoff the release handed it the lock.
	EventWake
	// EventWait: a Lock found the lock busy and waits for it. It comes
	// once per call, before the call's Wake events and its Acquire (whose
	// Blocked is then true).
	EventWait
)

var kindNames = [...]string{"", "acquire", "release", "renew", "lost", "wake", "wait"}

// String returns the kind's name: "acquire", "release", "renew", "lost",
// "wake" or "wait".
func (k EventKind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Outcome is how an acquisition ended.
type Outcome uint8

// The outcomes of an acquisition.
const (
	// OutcomeAcquired: the call returned the lock.
	OutcomeAcquired Outcome = iota + 1
	// OutcomeBusy: a single attempt (TryLock, or Lock with WithWait(0)) found the
	// lock held.
	OutcomeBusy
	// OutcomeTimeout: a waiting Lock stopped waiting without the lock: its
	// WithWait limit passed, its retry strategy gave up, or its context
	// ended.
	OutcomeTimeout
	// OutcomeError: the call failed otherwise: the store could not be reached, it
	// refused the command, the Locker was closed while the call ran.
	OutcomeError
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
	Kind EventKind
	// Backend names the driver: "redis", "redlock", "etcd" or "postgres".
	Backend string
	// Key is the key as the caller named it, without the Locker's prefix.
	Key string
	// Owner is the owner of the acquisition (see WithOwner), "" for none.
	Owner string
	// Lock is the hold the event is about: for Acquire only when the
	// outcome is OutcomeAcquired; nil for a Wait and a Wake. Observers may use it to tell
	// holds apart (it is comparable), never to release it.
	Lock Lock
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
	// Fence is the hold's fencing token (Acquire with outcome OutcomeAcquired,
	// Renew, Release, Lost), 0 when the hold has none.
	Fence uint64
	// Held is, for a Release or a Lost, how long the hold lasted, from the
	// moment it was acquired.
	Held time.Duration
	// Err is why an Acquire did not acquire; why a Renew failed (nil when
	// it renewed); why a hold was Lost (the cause in its *LostError:
	// matching ErrOwnershipLost or ErrLeaseExpired); for a Release, nil,
	// or an error matching ErrClosed when Close released the hold.
	Err error
}

// WithObserver sends the Locker's events to o (see [Observer]). Without it
// the Locker keeps no record of its events and pays nothing for them.
// Locker only.
func WithObserver(o Observer) Option {
	return func(s *settings.Options) {
		s.LockerOnly(lockerOnly("WithObserver"))
		if o == nil {
			s.Reject(fmt.Errorf("%w: nil observer", ErrInvalidOption))
			return
		}
		s.Observer = o
	}
}
