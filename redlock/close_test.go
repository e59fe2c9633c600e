package redlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// An Inspect under way when Close is called ends before Close returns:
// Close waits for the calls in flight before it waits for their requests,
// so that no request starts once it has. (Inspect, which election.Observe
// calls on a goroutine of its own, could start its requests while Close
// waited for the Locker's: a race on the Locker's WaitGroup, which the
// race detector saw in the conformance suite's Observe cell.)
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared[:3])
	gate, in := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.testHook = func() { // before the first request round: the Inspect's
		once.Do(func() {
			close(in)
			<-gate
		})
	}
	inspected := make(chan error, 1)
	go func() {
		_, err := l.Inspect(ctx, keyFor(t))
		inspected <- err
	}()
	<-in
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		close(gate)
		t.Fatalf("Close returned (%v) while an Inspect was under way", err)
	case <-time.After(time.Second): // Close waits, as it must
	}
	close(gate)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the Inspect could go on")
	}
	// Close waited for the Inspect's requests; its goroutine may post
	// what it returned a moment later.
	select {
	case err := <-inspected:
		if err != nil && !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("the Inspect under way: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the Inspect under way did not return once Close had")
	}
	if _, err := l.Inspect(ctx, keyFor(t)); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
}

// A call whose context has ended before it begins is not acquired, as one
// whose context ends while it waits: its error is a *dlock.NotAcquiredError
// that matches the context's error. (It was a *dlock.KeyError that did not
// match dlock.ErrNotAcquired, so that an election's campaign under a
// short deadline took it for a failure on a loaded machine.)
func TestCallWithEndedContext(t *testing.T) {
	l := newLocker(t, shared[:3])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := keyFor(t)
	for name, call := range map[string]func(context.Context, string, ...dlock.Option) (dlock.Lock, error){
		"TryLock": l.TryLock, "Lock": l.Lock, "TryRLock": l.TryRLock, "RLock": l.RLock, "TryWLock": l.TryWLock, "WLock": l.WLock,
	} {
		lk, err := call(ctx, k)
		var na *dlock.NotAcquiredError
		if lk != nil || !errors.As(err, &na) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context: (%v, %v), want a *dlock.NotAcquiredError matching context.Canceled", name, lk, err)
		}
	}
}
