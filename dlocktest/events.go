package dlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
)

// callerKey marks the contexts the events subtest passes to its calls, so
// that it can check that acquisition events carry the caller's context.
type callerKey struct{}

// events checks the events a Locker sends its observer, in order and with
// their fields: acquired, renewed, released; busy; timeout (a wait limit,
// a context's end); a wake-up and the acquisition after it; lost; released
// by Close.
func (s *suite) events(t *testing.T) {
	ctx := context.WithValue(s.context(t), callerKey{}, t.Name())
	var rec Recorder
	var mu sync.Mutex
	var foreign []observe.Event // acquisition events without the caller's context
	obs := observe.Func(func(c context.Context, e observe.Event) {
		if (e.Kind == observe.Acquire || e.Kind == observe.Wake) && c.Value(callerKey{}) == nil {
			mu.Lock()
			foreign = append(foreign, e)
			mu.Unlock()
		}
		rec.Observe(c, e)
	})
	a, b := s.locker(t, dlock.WithObserver(obs)), s.locker(t)
	// A lease the watchdog renews within a third of it, and that a loaded
	// machine does not lose on the way (at 1s, an acquisition whose reply
	// took 640ms lost it before the first renewal came back).
	ttl, bound := max(s.h.minTTL(), 3*time.Second), s.h.bound()

	// Acquired, renewed by the watchdog, released.
	k := key(t) + ":held"
	lk := mustLock(t)(a.TryLock(ctx, k, dlock.WithTTL(ttl)))
	rec.WaitFor(t, k, bound, "a renewal", func(evs []observe.Event) bool {
		_, ok := Last(evs, observe.Renew)
		return ok
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	evs := rec.WaitFor(t, k, bound, "the release", func(evs []observe.Event) bool {
		_, ok := Last(evs, observe.Release)
		return ok
	})
	checkAcquired(t, evs[0], lk, false)
	if evs[0].Attempts != 1 || evs[0].Backend == "" || evs[0].Waited <= 0 {
		t.Errorf("a TryLock's Acquire: attempts %d, backend %q, waited %v; want 1, a name, > 0", evs[0].Attempts, evs[0].Backend, evs[0].Waited)
	}
	for _, e := range evs[1 : len(evs)-1] {
		if e.Kind != observe.Renew || e.Err != nil || e.Lock != lk || e.Fence != lk.Fence() {
			t.Errorf("between the Acquire and the Release: %s (err %v, of the hold %v), want Renew events of the hold, renewed", e.Kind, e.Err, e.Lock == lk)
		}
	}
	if e := evs[len(evs)-1]; e.Lock != lk || e.Err != nil || e.Held <= 0 || e.Fence != lk.Fence() {
		t.Errorf("Release: of the hold %v, err %v, held %v, fence %d; want true, nil, > 0, %d", e.Lock == lk, e.Err, e.Held, e.Fence, lk.Fence())
	}

	// Busy, then timeouts: a wait limit and a context's end.
	k = key(t) + ":busy"
	held := mustLock(t)(b.TryLock(ctx, k))
	defer held.Unlock(ctx)
	na := mustBusy(t)(a.TryLock(ctx, k))
	mustBusy(t)(a.Lock(ctx, k, dlock.WithWait(0)))
	const wait = 200 * time.Millisecond
	mustBusy(t)(a.Lock(ctx, k, dlock.WithWait(wait)))
	dctx, cancel := context.WithTimeout(ctx, wait)
	mustBusy(t)(a.Lock(dctx, k))
	cancel()
	// Two Acquire events, busy; then, per wait, a Wait (unless the wait
	// ran out during its first attempt, on a slow machine) and an Acquire,
	// timeout, blocked when the Wait came.
	evs = rec.Events(k)
	if len(evs) < 4 {
		t.Fatalf("events of two busy calls and two waits that ran out:\n%s", Format(evs))
	}
	var acquires []observe.Event
	waited := false
	for i, e := range evs {
		switch {
		case e.Kind == observe.Wait && i >= 2 && !waited:
			waited = true
			if e.Lock != nil || e.Err != nil || e.Waited <= 0 {
				t.Errorf("event %d: Wait with a lock %v, err %v, waited %v; want none, nil, > 0", i, e.Lock != nil, e.Err, e.Waited)
			}
		case e.Kind == observe.Acquire:
			want := observe.Busy
			if len(acquires) >= 2 {
				want = observe.Timeout
			}
			if e.Outcome != want || e.Lock != nil || !errors.Is(e.Err, dlock.ErrNotAcquired) || e.Attempts < 1 || e.Blocked != waited {
				t.Errorf("event %d: Acquire %s (a lock %v, err %v, attempts %d, blocked %v); want %s with no lock, ErrNotAcquired, attempts, blocked %v",
					i, e.Outcome, e.Lock != nil, e.Err, e.Attempts, e.Blocked, want, waited)
			}
			waited = false
			acquires = append(acquires, e)
		default:
			t.Errorf("event %d: %s, want an Acquire or a Wait before one", i, e.Kind)
		}
	}
	if len(acquires) != 4 {
		t.Fatalf("%d Acquire events for four calls:\n%s", len(acquires), Format(evs))
	}
	if acquires[0].Attempts != 1 || acquires[0].Err.Error() != na.Error() {
		t.Errorf("a busy TryLock: attempts %d, err %v; want 1, %v", acquires[0].Attempts, acquires[0].Err, na)
	}
	if acquires[2].Waited < wait {
		t.Errorf("a wait limited to %v reports waiting %v", wait, acquires[2].Waited)
	}

	s.wakeEvents(t, ctx, &rec, a, b)

	// Lost: the server forgot the hold.
	if s.h.Lose != nil {
		k = key(t) + ":lost"
		lk = mustLock(t)(a.TryLock(ctx, k, dlock.WithTTL(ttl))) // renewed within ttl/3: the watchdog finds out soon
		s.h.Lose(t, k)
		waitDone(t, lk, bound)
		evs = rec.WaitFor(t, k, bound, "the loss", func(evs []observe.Event) bool {
			_, ok := Last(evs, observe.Lost)
			return ok
		})
		e := evs[len(evs)-1]
		var le *dlock.LostError
		if e.Kind != observe.Lost || e.Lock != lk || !errors.As(lk.Err(), &le) || e.Err != le.Err || !errors.Is(e.Err, dlock.ErrOwnershipLost) || e.Held <= 0 {
			t.Errorf("the last event of a lost hold: %s, of the hold %v, err %v, held %v; want Lost, true, the cause in Err() (%v), matching ErrOwnershipLost, > 0",
				e.Kind, e.Lock == lk, e.Err, e.Held, lk.Err())
		}
	}

	// Released by Close.
	k = key(t) + ":close"
	lk = mustLock(t)(a.TryLock(ctx, k))
	a.Close()
	evs = rec.Events(k)
	if e, ok := Last(evs, observe.Release); !ok || e.Lock != lk || !errors.Is(e.Err, dlock.ErrClosed) {
		t.Errorf("a hold that Close released: want a Release with an error matching ErrClosed; got\n%s", Format(evs))
	}

	mu.Lock()
	defer mu.Unlock()
	if len(foreign) > 0 {
		t.Errorf("acquisition events without the caller's context:\n%s", Format(foreign))
	}
}

// wakeEvents checks that a waiter woken by a release reports the wake-up,
// then its acquisition. The holder lets go once the waiter waits: when
// the store counts waiters (dlock.Inspector), it releases the lock once
// it sees one; otherwise its lease (the suite's short one) runs out, which
// wakes waiters that watch the key.
func (s *suite) wakeEvents(t *testing.T, ctx context.Context, rec *Recorder, a, b dlock.Locker) {
	k := key(t) + ":wake"
	insp, counts := b.(dlock.Inspector)
	if counts {
		info, err := insp.Inspect(ctx, k)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		counts = info.WaitersKnown
	}
	var holder dlock.Lock
	if counts {
		holder = mustLock(t)(b.TryLock(ctx, k))
	} else {
		holder = mustLock(t)(b.TryLock(ctx, k, dlock.WithLease(s.h.leaseTTL())))
	}
	type result struct {
		lk  dlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		// A fallback attempt a minute away: the wake-up, not the retry
		// timer, brings the waiter the lock.
		lk, err := a.Lock(ctx, k, dlock.WithWait(s.h.bound()), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		got <- result{lk, err}
	}()
	if counts {
		deadline := time.Now().Add(s.h.bound())
		for {
			info, err := insp.Inspect(ctx, k)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if info.Waiters > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiter never showed in Inspect")
			}
			time.Sleep(5 * time.Millisecond) // polling the store for a condition, bounded above
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	r := <-got
	lk := mustLock(t)(r.lk, r.err)
	defer lk.Unlock(ctx)
	evs := rec.Events(k)
	wake, ok := Last(evs, observe.Wake)
	if !ok || len(evs) < 3 || evs[0].Kind != observe.Wait || evs[len(evs)-1].Kind != observe.Acquire {
		t.Fatalf("a waiter woken by a release: want a Wait, Wake events, then an Acquire; got\n%s", Format(evs))
	}
	for _, e := range evs[1 : len(evs)-1] {
		if e.Kind != observe.Wake || e.Lock != nil || e.Waited <= 0 {
			t.Errorf("between the Wait and the Acquire: %s (a lock %v, waited %v); want Wake events with no lock, waited > 0", e.Kind, e.Lock != nil, e.Waited)
		}
	}
	acq := evs[len(evs)-1]
	checkAcquired(t, acq, lk, wake.Handoff)
	if !acq.Blocked {
		t.Error("the Acquire of a call that waited says it did not block")
	}
	if acq.Waited < wake.Waited {
		t.Errorf("the Acquire after a Wake waited %v, less than the Wake's %v", acq.Waited, wake.Waited)
	}
}

// checkAcquired checks an Acquire event of the hold lk.
func checkAcquired(t *testing.T, e observe.Event, lk dlock.Lock, handoff bool) {
	t.Helper()
	if e.Kind != observe.Acquire || e.Outcome != observe.Acquired || e.Lock != lk || e.Key != lk.Key() ||
		e.Fence != lk.Fence() || e.Err != nil || e.Handoff != handoff {
		t.Errorf("got %s %s (of the hold %v, key %q, fence %d, err %v, handoff %v); want Acquire acquired of %q, fence %d, handoff %v",
			e.Kind, e.Outcome, e.Lock == lk, e.Key, e.Fence, e.Err, e.Handoff, lk.Key(), lk.Fence(), handoff)
	}
}
