package redislock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// boundSlack is what the bounds of the tests below allow for scheduling
// on a loaded machine.
const boundSlack = time.Second

// returnsWithin runs call in a goroutine and fails t unless it returns
// within bound; it returns call's error.
func returnsWithin(t *testing.T, bound time.Duration, what string, call func() error) error {
	t.Helper()
	got := make(chan error, 1)
	begin := time.Now()
	go func() { got <- call() }()
	select {
	case err := <-got:
		t.Logf("%s returned after %v: %v", what, time.Since(begin).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		t.Fatalf("%s had not returned %v later", what, bound)
		return nil
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// defaultClient is a client of addr with go-redis's default timeouts and
// retries, as a user's would be, closed when t ends.
func defaultClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// Against a closed port, a Lock with a wait limit returns within the limit
// plus RequestTimeout, with an error matching dlock.ErrNotAcquired, and a
// TryLock within RequestTimeout, with an error that says the server was
// out of reach, not that the lock was busy.
func TestWaitBoundedClosedPort(t *testing.T) {
	l := lockerOf(t, defaultClient(t, closedAddr(t)))
	ctx := context.Background()
	const limit = time.Second
	err := returnsWithin(t, limit+RequestTimeout+boundSlack, "Lock with WithWait(1s)", func() error {
		_, err := l.Lock(ctx, keyFor(t), dlock.WithWait(limit))
		return err
	})
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Lock: %v, want an error matching ErrNotAcquired", err)
	}
	err = returnsWithin(t, RequestTimeout+boundSlack, "TryLock", func() error {
		_, err := l.TryLock(ctx, keyFor(t))
		return err
	})
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryLock: %v, want an error that is not ErrNotAcquired", err)
	}
}

// A server stopped (SIGSTOP) while a Lock waits accepts connections and
// never answers: the Lock returns within its limit plus RequestTimeout,
// with an error matching dlock.ErrNotAcquired, and a TryLock (its context
// without deadline) within RequestTimeout. The waiter's client has
// go-redis's defaults: timeouts longer than RequestTimeout, and retries.
func TestWaitBoundedStoppedServer(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	holder := newLocker(t, s)
	waiter := lockerOf(t, defaultClient(t, s.Addr()), dlock.WithRetry(dlock.FixedInterval(50*time.Millisecond)))
	key := keyFor(t)
	if _, err := holder.TryLock(ctx, key); err != nil {
		t.Fatal(err)
	}
	// A limit long enough for the waiter to queue first, however loaded
	// the machine.
	const limit = 3 * time.Second
	got := make(chan error, 1)
	begin := time.Now()
	go func() {
		_, err := waiter.Lock(ctx, key, dlock.WithWait(limit))
		got <- err
	}()
	queued(t, s, key, 1)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Resume() })
	bound := limit + RequestTimeout + boundSlack
	select {
	case err := <-got:
		t.Logf("Lock returned after %v: %v", time.Since(begin).Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("Lock: %v, want an error matching ErrNotAcquired", err)
		}
	case <-time.After(time.Until(begin.Add(bound))):
		t.Fatalf("Lock with WithWait(%v) had not returned %v after it began", limit, bound)
	}
	other := keyFor(t)
	err := returnsWithin(t, RequestTimeout+boundSlack, "TryLock", func() error {
		_, err := waiter.TryLock(ctx, other)
		return err
	})
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryLock: %v, want an error that is not ErrNotAcquired", err)
	}
	// The requests left on the wire run once the server continues, and
	// what they took is given back: the waiter's place in the queue, and
	// the lock the TryLock took.
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	dlocktest.Eventually(t, 5*time.Second, "the abandoned requests given back", func() bool {
		return c.ZCard(ctx, "{dlock:lock:"+key+"}:q").Val() == 0 && c.Exists(ctx, "dlock:lock:"+other).Val() == 0
	})
}
