package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/observe"
)

// The events the conformance suite cannot cause: with the client cut off
// from etcd, keep-alives fail (Renew with an error), the hold is lost at
// its lease deadline (Lost, ErrLeaseExpired), and an acquisition ends in
// an error (Acquire, outcome error).
func TestObserverCutOff(t *testing.T) {
	t.Parallel()
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(shared.Endpoint(0), "http://"))
	var rec dlocktest.Recorder
	l := newLocker(t, shared.Client(t, proxy.Addr()), dlock.WithObserver(&rec))
	ctx := context.Background()
	const key, ttl = "observe:cut", time.Second
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	evs := rec.WaitFor(t, key, ttl+slack, "the loss", func(evs []observe.Event) bool {
		_, ok := dlocktest.Last(evs, observe.Lost)
		return ok
	})
	if evs[0].Kind != observe.Acquire || evs[0].Outcome != observe.Acquired || evs[0].Backend != "etcd" || evs[0].Fence != lk.Fence() {
		t.Fatalf("first event: want Acquire acquired on etcd with the fence; got\n%s", dlocktest.Format(evs))
	}
	failed := 0
	for _, e := range evs[1 : len(evs)-1] {
		switch {
		case e.Kind != observe.Renew || e.Lock != lk:
			t.Errorf("between Acquire and Lost: %s, want Renew of the hold", e.Kind)
		case e.Err != nil:
			failed++
		case failed > 0:
			t.Errorf("a keep-alive that succeeded after one failed, cut off")
		}
	}
	if failed == 0 {
		t.Errorf("no failed renewal before the loss:\n%s", dlocktest.Format(evs))
	}
	if e := evs[len(evs)-1]; !errors.Is(e.Err, dlock.ErrLeaseExpired) || e.Lock != lk || e.Held < ttl/2 {
		t.Errorf("Lost: err %v, held %v; want ErrLeaseExpired, about %v", e.Err, e.Held, ttl)
	}

	const other = "observe:cut:error"
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	// The renewed lock's session cannot start: the call fails before its
	// first attempt.
	if _, err := l.TryLock(tctx, other); err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock cut off: %v, want an error", err)
	}
	evs = rec.Events(other)
	if len(evs) != 1 || evs[0].Outcome != observe.Failed || evs[0].Attempts != 0 || evs[0].Err == nil || evs[0].Lock != nil {
		t.Errorf("a TryLock cut off: want one Acquire, outcome error, no attempt; got\n%s", dlocktest.Format(evs))
	}
}
