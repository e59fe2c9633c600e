package redlock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// boundSlack is what the bounds of the tests below allow for scheduling
// on a loaded machine (make test at a load of 30 took 891ms for a 200ms
// timeout); still well below go-redis's own dial timeout of 5s, which
// an unbounded call would wait for.
const boundSlack = 1500 * time.Millisecond

// boundTimeout is the per-node timeout of the tests below.
const boundTimeout = 200 * time.Millisecond

// defaultClients are clients of addrs with go-redis's default options, as
// a user's would be (no ContextTimeoutEnabled: a read ends at the 3s
// ReadTimeout, whatever the context), closed when t ends.
func defaultClients(t *testing.T, addrs ...string) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// boundLocker is a Locker over clients with the per-node timeout
// boundTimeout, closed when t ends.
func boundLocker(t *testing.T, clients []redis.UniversalClient, opts ...dlock.Option) *Locker {
	t.Helper()
	l, err := New(clients, append([]dlock.Option{WithNodeTimeout(boundTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// startLock starts l.Lock with a wait limit, and returns where its error
// arrives.
func startLock(l *Locker, key string, limit time.Duration) <-chan error {
	got := make(chan error, 1)
	go func() {
		_, err := l.Lock(context.Background(), key, dlock.WithWait(limit))
		got <- err
	}()
	return got
}

// returnedWithin fails t unless the Lock started at begin with the wait
// limit limit returns on got, with an error matching dlock.ErrNotAcquired,
// within the limit plus the per-node timeout.
func returnedWithin(t *testing.T, got <-chan error, limit time.Duration, begin time.Time) {
	t.Helper()
	bound := limit + boundTimeout + boundSlack
	select {
	case err := <-got:
		t.Logf("Lock returned after %v: %v", time.Since(begin).Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("Lock: %v, want an error matching ErrNotAcquired", err)
		}
	case <-time.After(time.Until(begin.Add(bound))):
		t.Fatalf("Lock with WithWait(%v) had not returned %v after it began", limit, bound)
	}
}

// Against closed ports, a Lock with a wait limit returns within the limit
// plus the per-node timeout, with an error matching dlock.ErrNotAcquired
// (and ErrNoQuorum), and TryLock within the per-node timeout.
func TestWaitBoundedClosedPorts(t *testing.T) {
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	l := boundLocker(t, defaultClients(t, addrs...))
	begin := time.Now()
	returnedWithin(t, startLock(l, keyFor(t), time.Second), time.Second, begin)
	begin = time.Now()
	_, err := l.TryLock(context.Background(), keyFor(t))
	if took := time.Since(begin); took > boundTimeout+boundSlack {
		t.Errorf("TryLock took %v, want within the per-node timeout %v", took, boundTimeout)
	}
	if !errors.Is(err, ErrNoQuorum) || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryLock: %v, want ErrNoQuorum and not ErrNotAcquired", err)
	}
}

// Servers stopped (SIGSTOP) while a Lock waits accept connections and
// never answer: the Lock returns within its limit plus the per-node
// timeout, with an error matching dlock.ErrNotAcquired.
func TestWaitBoundedStoppedServers(t *testing.T) {
	s := start(t, 3)
	holder := newLocker(t, s)
	addrs := make([]string, len(s))
	for i, x := range s {
		addrs[i] = x.Addr()
	}
	waiter := boundLocker(t, defaultClients(t, addrs...), dlock.WithRetry(dlock.FixedInterval(50*time.Millisecond)))
	key := keyFor(t)
	if _, err := holder.TryLock(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	// A limit long enough for the waiter to queue on a majority first,
	// however loaded the machine: the check below must see it queued
	// before the limit takes it out of the queues. A majority is what it
	// needs to wait: an attempt that missed a node's timeout leaves it out
	// of that node's queue until its next attempt, which a waiter queued
	// on a majority makes only when woken or when its turn passes (under
	// load, one node's queue stayed empty for the whole limit).
	const limit = 6 * time.Second
	got := startLock(waiter, key, limit)
	cs := clients(t, s)
	dlocktest.Eventually(t, limit-time.Second, "the waiter queued on a majority of the nodes", func() bool {
		queued := 0
		for _, c := range cs {
			if c.ZCard(context.Background(), "{dlock:lock:"+key+"}:q").Val() == 1 {
				queued++
			}
		}
		return queued >= len(cs)/2+1
	})
	t.Cleanup(func() {
		for _, x := range s {
			x.Resume()
		}
	})
	for _, x := range s {
		if err := x.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	returnedWithin(t, got, limit, begin)
}
