package postgreslock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
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
