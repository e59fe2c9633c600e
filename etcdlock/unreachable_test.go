package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/observe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// requestTimeout bounds a request of a call that has no wait left.
const requestTimeout = etcdlock.RequestTimeout

// takeFunc is one way to acquire a key.
type takeFunc func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error)

// unreachableTake is a call that must not outlive its limit when etcd
// cannot be reached: a waiting one (limit is its wait), or a single
// attempt (limit 0: then one request timeout bounds it). block takes what
// keeps a waiting call waiting.
type unreachableTake struct {
	name        string
	limit       time.Duration
	take, block takeFunc
}

func unreachableTakes(wait time.Duration) []unreachableTake {
	w := dlock.WithWait(wait)
	lock := func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
		return l.TryLock(ctx, key)
	}
	return []unreachableTake{
		{"Lock", wait, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.Lock(ctx, key, w)
		}, lock},
		{"Lock WithLease", wait, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.Lock(ctx, key, w, dlock.WithLease(10*time.Second))
		}, lock},
		{"RLock", wait, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.RLock(ctx, key, w)
		},
			func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
				return l.TryWLock(ctx, key)
			}},
		{"Acquire", wait, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.Acquire(ctx, key, 1, w)
		}, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.TryAcquire(ctx, key, 1)
		}},
		{"TryLock", 0, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.TryLock(ctx, key)
		}, nil},
		{"TryWLock", 0, func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.TryWLock(ctx, key)
		}, nil},
	}
}

// returnsWithin runs take under a context of a minute and fails the test
// unless it returns within limit + requestTimeout + slack, with an error
// that names the key: for a wait that ran out (limit > 0), one that
// matches ErrNotAcquired and is no context error; for a single attempt,
// a *dlock.KeyError that does not say the lock is busy, for a server out
// of reach is not a busy lock (as with the Redis driver).
func returnsWithin(t *testing.T, limit time.Duration, take func(ctx context.Context) (dlock.Lock, error), key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	got := goTake(func() (dlock.Lock, error) { return take(ctx) })
	bound := limit + requestTimeout + slack
	select {
	case r := <-got:
		if r.err == nil {
			r.lk.Unlock(ctx)
			t.Fatal("acquired with etcd out of reach")
		}
		var ke *dlock.KeyError
		var na *dlock.NotAcquiredError
		switch {
		case limit > 0 && (!errors.As(r.err, &na) || na.Key != key || errors.Is(r.err, context.DeadlineExceeded)):
			t.Errorf("error %v, want a *dlock.NotAcquiredError for %q that is no context error", r.err, key)
		case limit == 0 && (!errors.As(r.err, &ke) || ke.Key != key || errors.Is(r.err, dlock.ErrNotAcquired)):
			t.Errorf("error %v, want a *dlock.KeyError for %q that is not ErrNotAcquired", r.err, key)
		}
		t.Logf("returned after %v: %v", time.Since(start), r.err)
	case <-time.After(bound):
		t.Fatalf("still running %v after the call, past its limit %v + %v + %v", bound, limit, requestTimeout, slack)
	}
}

// TestUnreachableClosedPort: a Locker whose client points at a closed
// loopback port returns from a waiting call by its wait limit plus one
// request timeout, and from a single attempt by one request timeout,
// instead of waiting in "start a session" until the caller's context ends.
func TestUnreachableClosedPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cli, err := clientv3.New(etcdtest.ClientConfig("http://" + addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	l := newLocker(t, cli)
	for _, tc := range unreachableTakes(time.Second) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "unreachable:" + driver.NewToken()[:6]
			returnsWithin(t, tc.limit, func(ctx context.Context) (dlock.Lock, error) { return tc.take(ctx, l, key) }, key)
		})
	}
}

// TestUnreachableServerStopped: with the only server stopped while calls
// wait for held keys, each returns by its wait limit plus one request
// timeout; and after it stopped, a single attempt of a Locker whose
// session was started returns within one request timeout.
func TestUnreachableServerStopped(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	holder := newLocker(t, c.Client(t))
	waits := make(chan struct{}, 16)
	watch := observe.Func(func(_ context.Context, e observe.Event) {
		if e.Kind == observe.Wait {
			waits <- struct{}{}
		}
	})
	l := newLocker(t, c.Client(t), dlock.WithObserver(watch))
	ctx := context.Background()
	key := "stopped:" + driver.NewToken()[:6]
	if _, err := l.TryLock(ctx, key+":session"); err != nil { // starts l's session
		t.Fatal(err)
	}

	const wait = 3 * time.Second
	takes := unreachableTakes(wait)
	for _, tc := range takes {
		if tc.block != nil {
			if _, err := tc.block(ctx, holder, key+":"+tc.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	type result struct {
		name  string
		start time.Time
		limit time.Duration
		ret   time.Time
		err   error
	}
	results := make(chan result, len(takes))
	waiting := 0
	for _, tc := range takes {
		if tc.limit == 0 {
			continue
		}
		waiting++
		go func() {
			start := time.Now()
			lk, err := tc.take(ctx, l, key+":"+tc.name)
			if err == nil {
				lk.Unlock(ctx)
			}
			results <- result{tc.name, start, tc.limit, time.Now(), err}
		}()
	}
	for range waiting {
		await(t, waits, 10*time.Second, "waiting call")
	}
	// The server stops taking connections at once, and closes the open
	// ones within its request timeout.
	stopping := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Stop(0)
	}()
	defer func() { <-stopped }()
	for range waiting {
		r := await(t, results, wait+requestTimeout+2*slack, "return of a waiting call")
		if el := r.ret.Sub(r.start); el > r.limit+requestTimeout+slack {
			t.Errorf("%s returned %v after the call, past its limit %v + %v + %v: %v", r.name, el, r.limit, requestTimeout, slack, r.err)
		}
		if !errors.Is(r.err, dlock.ErrNotAcquired) {
			t.Errorf("%s: %v, want ErrNotAcquired when the wait ran out", r.name, r.err)
		}
		t.Logf("%s: returned %v after the call (the server stopping from %v after it): %v", r.name, r.ret.Sub(r.start), stopping.Sub(r.start), r.err)
	}
	<-stopped
	for _, tc := range takes {
		if tc.limit != 0 {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			k := key + ":" + tc.name
			returnsWithin(t, tc.limit, func(ctx context.Context) (dlock.Lock, error) { return tc.take(ctx, l, k) }, k)
		})
	}
}
