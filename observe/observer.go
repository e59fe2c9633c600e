package observe

import "context"

// An Observer watches what a Locker's locks do. Set one with
// dlock.WithObserver.
//
// Observe is called synchronously, on the goroutine where the event
// happened: the caller's for an acquisition, a release by Unlock and a
// wake-up, the Locker's own for a renewal and most losses. Its ctx is the
// acquiring call's context for Acquire, Wait and Wake events (a tracer
// finds the caller's span there), and context.Background for the events
// of a hold after its acquisition. It must return quickly, be safe for
// concurrent use, and must not call the Locker, nor the event's Lock other
// than through [Hold], for either may be in the middle of the call that
// fired the event.
//
// The events of one hold come in their order: an Acquire with outcome
// Acquired, then Renew events, then one Release or Lost. A Lock that waits
// fires a Wait, then Wake events, before its Acquire.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Func is a function that is an Observer.
type Func func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f Func) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Hold is what an observer may use of the lock an event is about: its key,
// its fence and its end. It is comparable, so that an observer can tell
// holds apart (a map keyed by Hold follows each one from its Acquire to its
// Release or Lost); it is a dlock.Lock, which an observer must never
// release.
type Hold interface {
	Key() string
	Fence() uint64
	Done() <-chan struct{}
}
