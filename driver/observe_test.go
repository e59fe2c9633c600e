package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
)

// events records the events of a table.
type events struct {
	mu   sync.Mutex
	evs  []observe.Event
	ctxs []context.Context
}

func (r *events) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
	r.ctxs = append(r.ctxs, ctx)
}

func observedTable(r *events) *Table[*fake] {
	return newObservedTable(dlock.Options{Observer: r}, nil)
}

// Without an observer the event calls keep nothing and allocate nothing.
func TestObserveUnset(t *testing.T) {
	tb := newTable(nil)
	ctx := context.Background()
	if tb.Observed() {
		t.Fatal("a table without observer says it is observed")
	}
	allocs := testing.AllocsPerRun(100, func() {
		f := &fake{}
		f.Init(HoldLock, "k", "", false)
		tb.Begin(ctx, f)
		tb.Attempted(f)
		tb.Waiting(f)
		tb.Woken(f, true)
		tb.Failed(f, true, dlock.ErrNotAcquired)
		tb.Renewed(f, nil)
		if f.obs != nil {
			t.Fatal("a hold of a table without observer keeps observations")
		}
	})
	if allocs > 1 { // the fake itself
		t.Errorf("%v allocations per acquisition without observer, want the handle's 1", allocs)
	}
}

// The events of a hold come in order, with the acquiring call's context
// and what the driver reported along the way.
func TestObserveOrder(t *testing.T) {
	var r events
	tb := observedTable(&r)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "caller")
	f := newFake("k", "o", false)
	f.fence = 7
	if err := tb.Reserve(f, true); err != nil {
		t.Fatal(err)
	}
	tb.Begin(ctx, f)
	tb.Attempted(f)
	tb.Waiting(f)
	tb.Waiting(f) // once per call
	tb.Attempted(f)
	tb.Woken(f, true)
	if err := tb.Add(f); err != nil {
		t.Fatal(err)
	}
	tb.Leave()
	tb.Renewed(f, nil)
	tb.Renewed(f, errors.New("no reply"))
	tb.End(f, &dlock.LostError{Key: "k", Err: dlock.ErrLeaseExpired})
	tb.Renewed(f, nil) // after the end: nothing

	want := []string{"wait", "wake", "acquire", "renew", "renew", "lost"}
	if len(r.evs) != len(want) {
		t.Fatalf("%d events, want %v", len(r.evs), want)
	}
	for i, e := range r.evs {
		if e.Kind.String() != want[i] || e.Backend != "mem" || e.Key != "k" || e.Owner != "o" {
			t.Errorf("event %d: %s on %q, key %q, owner %q; want %s on mem, k, o", i, e.Kind, e.Backend, e.Key, e.Owner, want[i])
		}
	}
	for i := range 3 {
		if r.ctxs[i].Value(key{}) != "caller" {
			t.Errorf("event %d (%s) lacks the caller's context", i, r.evs[i].Kind)
		}
	}
	acq := r.evs[2]
	if acq.Outcome != observe.Acquired || acq.Attempts != 2 || !acq.Handoff || !acq.Blocked || acq.Fence != 7 || acq.Lock != f || acq.Waited <= 0 {
		t.Errorf("Acquire: %+v", acq)
	}
	if r.evs[3].Err != nil || r.evs[4].Err == nil || r.evs[3].Lock != f {
		t.Errorf("Renew events: %v, %v; want ok then failed", r.evs[3].Err, r.evs[4].Err)
	}
	if lost := r.evs[5]; !errors.Is(lost.Err, dlock.ErrLeaseExpired) || errors.Is(lost.Err, dlock.ErrLockLost) || lost.Held <= 0 {
		t.Errorf("Lost: err %v (want the cause, not the LostError), held %v", lost.Err, lost.Held)
	}
}

// An acquisition that Close races: its Acquire comes before the Release
// that Close makes, or it fails with ErrClosed; never a Release first.
func TestObserveCloseRace(t *testing.T) {
	for i := range 200 {
		var r events
		tb := observedTable(&r)
		f := newFake(fmt.Sprint("k", i), "", false)
		if err := tb.Reserve(f, false); err != nil {
			t.Fatal(err)
		}
		tb.Begin(context.Background(), f)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if all, ok := tb.Close(); ok {
				for _, h := range all {
					tb.End(h, ErrReleasedByClose)
				}
			}
		}()
		if err := tb.Add(f); err != nil {
			tb.Failed(f, false, err)
		}
		<-done
		r.mu.Lock()
		if len(r.evs) == 0 || r.evs[0].Kind != observe.Acquire {
			t.Fatalf("first event %v, want an Acquire", r.evs)
		}
		if r.evs[0].Outcome == observe.Acquired && (len(r.evs) != 2 || r.evs[1].Kind != observe.Release || !errors.Is(r.evs[1].Err, dlock.ErrClosed)) {
			t.Fatalf("an acquisition that Close released: %v", r.evs)
		}
		r.mu.Unlock()
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		wait bool
		want observe.Outcome
	}{
		{&dlock.NotAcquiredError{Key: "k"}, false, observe.Busy},
		{&dlock.NotAcquiredError{Key: "k"}, true, observe.Timeout},
		{&dlock.NotAcquiredError{Key: "k", Err: context.Canceled}, false, observe.Timeout},
		{&dlock.NotAcquiredError{Key: "k", Err: context.DeadlineExceeded}, true, observe.Timeout},
		{&dlock.NotAcquiredError{Key: "k", Err: dlock.ErrClosed}, true, observe.Failed},
		{&dlock.KeyError{Key: "k", Err: errors.New("connection refused")}, true, observe.Failed},
		{&dlock.KeyError{Key: "k", Err: dlock.ErrClosed}, false, observe.Failed},
	} {
		if got := outcomeOf(tc.err, tc.wait); got != tc.want {
			t.Errorf("outcomeOf(%v, wait %v) = %s, want %s", tc.err, tc.wait, got, tc.want)
		}
	}
}
