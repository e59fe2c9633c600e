package postgreslock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const requestBound = postgreslock.RequestTimeout

// returnsWithin runs f with the shared server paused, and fails unless f
// returns an error within bound and a loaded machine's slack.
func returnsWithin(t *testing.T, what string, bound time.Duration, f func() error) {
	t.Helper()
	shared.Pause()
	defer shared.Resume()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	const slack = 5 * time.Second
	select {
	case err := <-done:
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded while the server was paused", what)
		}
		if took > bound+slack {
			t.Fatalf("%s returned after %v; want about %v", what, took, bound)
		}
		if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s returned %v; want a net.Error whose Timeout() is true", what, err)
		}
		t.Logf("%s returned after %v: %v", what, took, err)
	case <-time.After(bound + 2*slack):
		shared.Resume()
		<-done
		t.Fatalf("%s did not return in %v with the server paused", what, bound+2*slack)
	}
}

// A TryLock whose statement the server does not answer returns within
// the request bound, its outcome unknown.
func TestTryLockBoundedPausedServer(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, pool(t, ""))
	warm, err := l.TryLock(ctx, t.Name()+":warm") // a connection in the pool
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, "TryLock", requestBound, func() error {
		lk, err := l.TryLock(ctx, fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano()))
		if err == nil {
			lk.Unlock(ctx)
		}
		return err
	})
}

// An Unlock whose statement the server does not answer returns within the
// request bound with the error; the row lapses at its lease.
func TestUnlockBoundedPausedServer(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, pool(t, ""))
	// A key of this run's own: the row of a release that got no answer
	// stays until its lease runs out.
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, "Unlock", requestBound, func() error { return lk.Unlock(ctx) })
	if lk.Err() == nil {
		t.Fatal("the hold still reports held after its Unlock returned")
	}
}

// Close ends the statement of a TryLock in flight whose context never
// ends at once: with the server paused, the statement fails long before
// the request bound, and the TryLock returns ErrClosed (once the row it
// may have written is given back).
func TestCloseEndsTryLockInFlight(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	sent, ended := make(chan struct{}, 1), make(chan error, 1)
	cfg.ConnConfig.Tracer = &acquireTracer{sent: sent, ended: ended}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := postgreslock.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	warm, err := l.TryLock(ctx, key+":warm") // a connection in the pool
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-sent
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	shared.Pause()
	resumed := false
	defer func() {
		if !resumed {
			shared.Resume()
		}
	}()
	done := make(chan error, 1)
	go func() {
		lk, err := l.TryLock(ctx, key)
		if err == nil {
			lk.Unlock(ctx)
		}
		done <- err
	}()
	select {
	case <-sent:
	case <-time.After(requestBound):
		t.Fatal("the TryLock sent no statement")
	}
	closed := time.Now()
	go l.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the statement in flight succeeded with the server paused")
		}
		t.Logf("the statement ended %v after Close: %v", time.Since(closed), err)
	case <-time.After(requestBound - time.Second):
		t.Fatalf("the statement in flight did not end within %v of Close", requestBound-time.Second)
	}
	shared.Resume()
	resumed = true
	select {
	case err := <-done:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("TryLock in flight during Close: %v; want ErrClosed", err)
		}
	case <-time.After(2 * requestBound):
		t.Fatal("TryLock in flight did not return once the server resumed")
	}
}

// acquireTracer is a pgx tracer that tells when an acquisition's
// statement is sent, and when it ended, with its error.
type acquireTracer struct {
	sent  chan struct{}
	ended chan error
}

type acquiring struct{}

func (a *acquireTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "_acquire(") {
		return ctx
	}
	a.sent <- struct{}{}
	return context.WithValue(ctx, acquiring{}, true)
}

func (a *acquireTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(acquiring{}) != nil {
		a.ended <- d.Err
	}
}
