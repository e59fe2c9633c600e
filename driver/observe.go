package driver

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
)

// observed is what a hold keeps of its acquisition for the Locker's
// observer. Only a Table with an observer makes one: without one, a hold
// pays for nothing but a nil pointer.
type observed struct {
	ctx      context.Context // the acquiring call's, until the call ends
	began    time.Time       // when the call began
	acquired time.Time       // when the hold was acquired; under Hold.ending
	attempts int
	handoff  bool
	waiting  bool // the call fired its Wait event
}

// The events of a Locker, for the observer set with dlock.WithObserver.
// A driver makes one call per event site; the table fires the events:
//
//	Begin     when an acquisition starts (after Reserve)
//	Attempted at each attempt that asks the store for the lock
//	Waiting   when a Lock finds the lock busy and starts to wait
//	Woken     when a release wakes a waiter
//	Add       fires Acquire (acquired), before the hold can end
//	Failed    fires Acquire (busy, timeout, error), for a call that returns no lock
//	Renewed   fires Renew, for each renewal of a held lock
//	End       fires Release or Lost
//
// Every one of them returns at once when the Locker has no observer.

// Observed reports whether the table has an observer: a driver may skip
// the work of an event that nobody watches.
func (t *Table[H]) Observed() bool { return t.obs != nil }

// Begin records that the acquisition of h, made by a call with ctx, starts
// now. Call it once, after Reserve admitted h.
func (t *Table[H]) Begin(ctx context.Context, h H) {
	if t.obs == nil {
		return
	}
	h.hold().obs = &observed{ctx: ctx, began: time.Now()}
}

// observed returns what h keeps for the observer, made now if the driver
// did not call Begin.
func (h *Hold) observed() *observed {
	if h.obs == nil {
		h.obs = &observed{began: time.Now()}
	}
	return h.obs
}

// Attempted counts one attempt of h's acquisition: a request that asks
// the store for the lock. Call it on the acquiring goroutine.
func (t *Table[H]) Attempted(h H) {
	if t.obs == nil {
		return
	}
	h.hold().observed().attempts++
}

// Waiting fires the Wait event of h, a Lock that found the lock busy and
// starts to wait, once per call. Call it on the acquiring goroutine.
func (t *Table[H]) Waiting(h H) {
	if t.obs == nil {
		return
	}
	hd := h.hold()
	o := hd.observed()
	if o.waiting {
		return
	}
	o.waiting = true
	t.obs.Observe(o.context(), observe.Event{
		Kind: observe.Wait, Backend: t.backend, Key: hd.key, Owner: hd.owner,
		Waited: time.Since(o.began),
	})
}

// Woken fires a Wake event for h, a waiter that a release woke up;
// handoff says that the release handed it the lock, which it now takes
// without an attempt of its own. Call it on the acquiring goroutine.
func (t *Table[H]) Woken(h H, handoff bool) {
	if t.obs == nil {
		return
	}
	hd := h.hold()
	o := hd.observed()
	o.handoff = handoff
	t.obs.Observe(o.context(), observe.Event{
		Kind: observe.Wake, Backend: t.backend, Key: hd.key, Owner: hd.owner,
		Waited: time.Since(o.began), Handoff: handoff,
	})
}

// Failed fires the Acquire event of a call that returns no lock for h,
// with err: busy when err matches dlock.ErrNotAcquired and the call made
// one attempt (wait is false), timeout when a waiting call stopped waiting
// or its context ended, error otherwise.
func (t *Table[H]) Failed(h H, wait bool, err error) {
	if t.obs == nil {
		return
	}
	hd := h.hold()
	o := hd.observed()
	ctx := o.context()
	o.ctx = nil
	t.obs.Observe(ctx, observe.Event{
		Kind: observe.Acquire, Backend: t.backend, Key: hd.key, Owner: hd.owner,
		Outcome: outcomeOf(err, wait), Waited: time.Since(o.began),
		Attempts: o.attempts, Handoff: o.handoff, Blocked: o.waiting, Err: err,
	})
}

// outcomeOf classifies the error of an acquisition that returned no lock.
func outcomeOf(err error, wait bool) observe.Outcome {
	var na *dlock.NotAcquiredError
	switch {
	case !errors.As(err, &na):
		return observe.Failed
	case errors.Is(na.Err, context.Canceled) || errors.Is(na.Err, context.DeadlineExceeded):
		return observe.Timeout
	case na.Err != nil:
		return observe.Failed // the session that would hold it ended, the Locker closed
	case wait:
		return observe.Timeout
	}
	return observe.Busy
}

// acquiredEvent fires the Acquire event of h, which Add just made held.
// Called with h's ending mutex held, so that no End of h can fire before
// it.
func (t *Table[H]) acquiredEvent(h H) {
	hd := h.hold()
	o := hd.observed()
	ctx := o.context()
	o.ctx = nil
	o.acquired = time.Now()
	t.obs.Observe(ctx, observe.Event{
		Kind: observe.Acquire, Backend: t.backend, Key: hd.key, Owner: hd.owner, Lock: h,
		Outcome: observe.Acquired, Waited: o.acquired.Sub(o.began),
		Attempts: o.attempts, Handoff: o.handoff, Blocked: o.waiting, Fence: h.Fence(),
	})
}

// Renewed fires a Renew event for h: renewed when err is nil, else the
// renewal failed for err. A hold that ended meanwhile fires nothing.
func (t *Table[H]) Renewed(h H, err error) {
	if t.obs == nil {
		return
	}
	hd := h.hold()
	hd.ending.Lock()
	defer hd.ending.Unlock()
	if hd.State() != Held {
		return
	}
	t.obs.Observe(context.Background(), observe.Event{
		Kind: observe.Renew, Backend: t.backend, Key: hd.key, Owner: hd.owner, Lock: h,
		Fence: h.Fence(), Err: err,
	})
}

// endEvent fires the Release or Lost event of h, which End is ending with
// err. Called with h's ending mutex held.
func (t *Table[H]) endEvent(h H, err error) {
	hd := h.hold()
	e := observe.Event{
		Kind: observe.Release, Backend: t.backend, Key: hd.key, Owner: hd.owner, Lock: h,
		Fence: h.Fence(), Held: time.Since(hd.obs.acquired),
	}
	switch {
	case errors.Is(err, dlock.ErrLockLost):
		e.Kind = observe.Lost
		if e.Err = errors.Unwrap(err); e.Err == nil {
			e.Err = err
		}
	case errors.Is(err, dlock.ErrClosed):
		e.Err = err
	}
	t.obs.Observe(context.Background(), e)
}

// context returns the acquiring call's context, or Background once the
// call ended.
func (o *observed) context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// Held returns the holds the table has now, in no order: for a driver
// whose renewals serve many holds at once (etcd's shared lease), to report
// each.
func (t *Table[H]) Held() []H {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []H
	var zero H
	for _, e := range t.held {
		if e.plain != zero && e.plain.hold().State() == Held {
			all = append(all, e.plain)
		}
		all = append(all, e.owned...)
	}
	return all
}
