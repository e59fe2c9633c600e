package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/observe"
	"github.com/redis/go-redis/v9"
)

// The events the conformance suite cannot cause: with the server paused,
// renewals fail (Renew with an error: the client's read timeout is short,
// so each fails before the lease deadline), the hold is lost at its
// deadline (Lost, ErrLeaseExpired), and an attempt ends in an error
// (Acquire, outcome error).
func TestObserverServerPaused(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	opts := s.Options()
	opts.ReadTimeout = 30 * time.Millisecond
	client := redis.NewClient(opts)
	defer client.Close()
	var rec dlocktest.Recorder
	l, err := New(client, dlock.WithObserver(&rec))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := keyFor(t)
	const ttl = time.Second
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer s.Resume()
	evs := rec.WaitFor(t, key, ttl+5*time.Second, "the loss", func(evs []observe.Event) bool {
		_, ok := dlocktest.Last(evs, observe.Lost)
		return ok
	})
	if evs[0].Kind != observe.Acquire || evs[0].Outcome != observe.Acquired || evs[0].Backend != "redis" {
		t.Fatalf("first event: want Acquire acquired on redis; got\n%s", dlocktest.Format(evs))
	}
	failed := 0
	for _, e := range evs[1 : len(evs)-1] {
		switch {
		case e.Kind != observe.Renew:
			t.Errorf("between Acquire and Lost: %s, want Renew", e.Kind)
		case e.Err != nil:
			failed++
		case failed > 0:
			t.Errorf("a renewal that succeeded after one failed, with the server paused")
		}
	}
	if failed == 0 {
		t.Errorf("no failed renewal before the loss:\n%s", dlocktest.Format(evs))
	}
	if e := evs[len(evs)-1]; !errors.Is(e.Err, dlock.ErrLeaseExpired) || e.Lock != lk || e.Held < ttl/2 {
		t.Errorf("Lost: err %v, held %v; want ErrLeaseExpired, about %v", e.Err, e.Held, ttl)
	}

	other := key + ":error"
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := l.TryLock(tctx, other); err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with the server paused: %v, want an error", err)
	}
	evs = rec.Events(other)
	if len(evs) != 1 || evs[0].Outcome != observe.Failed || evs[0].Attempts != 1 || evs[0].Err == nil || evs[0].Lock != nil {
		t.Errorf("a TryLock that got no reply: want one Acquire, outcome error, 1 attempt; got\n%s", dlocktest.Format(evs))
	}
}

// A release hands the lock to the queued waiter: its Wake and its Acquire
// say hand-off, and the hand-off is not an attempt of its own.
func TestObserverHandoff(t *testing.T) {
	ctx := context.Background()
	var rec dlocktest.Recorder
	a, b := newLocker(t, shared, dlock.WithObserver(&rec)), newLocker(t, shared)
	key := keyFor(t)
	held, err := b.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		// A long fallback: the claim window of the grant (twice it) cannot
		// run short on a loaded machine.
		lk, err := a.Lock(ctx, key, dlock.WithWait(10*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	dlocktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
		info, err := b.Inspect(ctx, key)
		return err == nil && info.Waiters > 0
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	var evs []observe.Event // but renewals: the watchdog renews a hand-off's short grant early
	for _, e := range rec.Events(key) {
		if e.Kind != observe.Renew {
			evs = append(evs, e)
		}
	}
	if len(evs) != 4 || evs[0].Kind != observe.Wait || evs[1].Kind != observe.Wake || !evs[1].Handoff ||
		evs[2].Kind != observe.Acquire || !evs[2].Handoff || evs[2].Attempts != 2 || evs[3].Kind != observe.Release {
		t.Errorf("a hand-off: want Wait, Wake (hand-off), Acquire (hand-off, 2 attempts: the first and the one that queued), Release; got\n%s", dlocktest.Format(evs))
	}
}
