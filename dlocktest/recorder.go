package dlocktest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/observe"
)

// Recorder is a observe.Observer that keeps every event it is given, for
// tests: pass it to a Locker with dlock.WithObserver, then read or wait
// for the events of a key. The zero Recorder is ready; it is safe for
// concurrent use.
type Recorder struct {
	mu      sync.Mutex
	events  []observe.Event
	changed chan struct{} // closed and replaced at each event
}

// Observe records e.
func (r *Recorder) Observe(_ context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Events returns the events recorded so far about key, oldest first.
func (r *Recorder) Events(key string) []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.of(key)
}

func (r *Recorder) of(key string) []observe.Event {
	var out []observe.Event
	for _, e := range r.events {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// WaitFor waits up to d until the events about key satisfy cond, and
// returns them; it fails t, listing them, when d passes first.
func (r *Recorder) WaitFor(t testing.TB, key string, d time.Duration, what string, cond func([]observe.Event) bool) []observe.Event {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		evs := r.of(key)
		if cond(evs) {
			r.mu.Unlock()
			return evs
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not seen within %v; the events of %q:\n%s", what, d, key, Format(evs))
			return nil
		}
	}
}

// Last returns the last event of kind k in evs, and whether there is one.
func Last(evs []observe.Event, k observe.Kind) (observe.Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == k {
			return evs[i], true
		}
	}
	return observe.Event{}, false
}

// Format writes events one a line, for a test's failure message.
func Format(evs []observe.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\t%s", e.Kind)
		if e.Kind == observe.Acquire {
			fmt.Fprintf(&b, " %s attempts=%d", e.Outcome, e.Attempts)
		}
		fmt.Fprintf(&b, " fence=%d handoff=%v waited=%v held=%v", e.Fence, e.Handoff, e.Waited, e.Held)
		if e.Err != nil {
			fmt.Fprintf(&b, " err=%v", e.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
