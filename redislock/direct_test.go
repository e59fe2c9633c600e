package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// boundedClient is a client of s whose reads and writes end at its
// context's deadline (ContextTimeoutEnabled), closed when t ends.
func boundedClient(t *testing.T, s *redistest.Server) *redis.Client {
	o := s.Options()
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// With a client that bounds a command by its context's deadline, a lone
// attempt is sent on its caller's goroutine, whether or not its context
// can be cancelled: no worker starts, for the client keeps RequestTimeout
// itself. A server stopped (SIGSTOP) then makes TryLock return within
// RequestTimeout, with an error that is not ErrNotAcquired, and what the
// attempt took is given back once the server continues.
func TestLoneAttemptSentByCaller(t *testing.T) {
	s := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := lockerOf(t, boundedClient(t, s))
	key := keyFor(t)
	for range 20 {
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lk, err = l.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.reqs.started.Load(); n != 0 {
		t.Errorf("%d workers started for 40 lone attempts, want none", n)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Resume() })
	other := keyFor(t)
	err := returnsWithin(t, RequestTimeout+boundSlack, "TryLock", func() error {
		_, err := l.TryLock(ctx, other)
		return err
	})
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryLock: %v, want an error that is not ErrNotAcquired", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	dlocktest.Eventually(t, 5*time.Second, "the stalled attempt given back", func() bool {
		return c.Exists(ctx, "dlock:lock:"+other).Val() == 0
	})
}

// A cancel while a lone attempt that its caller sent is on the wire ends
// the wait no later than the request's bound: the client reads the reply
// until the context's deadline, not until its cancel. Lock then returns
// the context's error, and what the attempt took is given back once the
// server continues.
func TestLoneAttemptCancelled(t *testing.T) {
	s := redistest.Start(t)
	l := lockerOf(t, boundedClient(t, s))
	key := keyFor(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Resume() })
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	err := returnsWithin(t, RequestTimeout+boundSlack, "Lock", func() error {
		_, err := l.Lock(ctx, key)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lock: %v, want context.Canceled", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	dlocktest.Eventually(t, 5*time.Second, "the cancelled attempt given back", func() bool {
		return c.Exists(context.Background(), "dlock:lock:"+key).Val() == 0
	})
}
