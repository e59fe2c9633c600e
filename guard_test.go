package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// fakeLock is a dlock.Lock whose end the test decides: a test double for
// Guard, which needs nothing but the Lock interface.
type fakeLock struct {
	mu       sync.Mutex
	done     chan struct{}
	err      error
	unlocked int
}

func newFakeLock() *fakeLock { return &fakeLock{done: make(chan struct{})} }

func (f *fakeLock) Key() string           { return "k" }
func (f *fakeLock) Token() string         { return "t" }
func (f *fakeLock) Fence() uint64         { return 0 }
func (f *fakeLock) Done() <-chan struct{} { return f.done }
func (f *fakeLock) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
func (f *fakeLock) Refresh(context.Context, time.Duration) error { return nil }
func (f *fakeLock) TTL(context.Context) (time.Duration, error)   { return time.Second, nil }

// end closes Done with err, as a driver does once.
func (f *fakeLock) end(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
		close(f.done)
	}
}

func (f *fakeLock) Unlock(context.Context) error {
	f.mu.Lock()
	f.unlocked++
	ended := f.err != nil
	f.mu.Unlock()
	if ended {
		return f.Err()
	}
	f.end(dlock.ErrNotHeld)
	return nil
}

func waitCancelled(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the guarded context is still live 5s after the hold ended")
	}
}

// A hold that ends for any reason but the guard's own release cancels the
// guarded work, with the reason as the cause, and release reports it.
func TestGuardCancelsOnEveryEnd(t *testing.T) {
	closed := errors.Join(dlock.ErrNotHeld, dlock.ErrClosed)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"lost", &dlock.LostError{Key: "k", Err: dlock.ErrOwnershipLost}},
		{"released by Close", closed},
		{"released elsewhere", dlock.ErrNotHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk := newFakeLock()
			ctx, release := dlock.Guard(context.Background(), lk)
			lk.end(tc.err)
			waitCancelled(t, ctx)
			if cause := context.Cause(ctx); !errors.Is(cause, tc.err) {
				t.Errorf("cause = %v, want %v", cause, tc.err)
			}
			err := release()
			if err == nil || !errors.Is(err, tc.err) {
				t.Errorf("release = %v, want an error matching %v", err, tc.err)
			}
		})
	}
}

// The guard's own release ends the hold without cancelling the context
// with a loss, and returns nil.
func TestGuardRelease(t *testing.T) {
	lk := newFakeLock()
	ctx, release := dlock.Guard(context.Background(), lk)
	if err := release(); err != nil {
		t.Fatalf("release = %v", err)
	}
	if lk.unlocked != 1 {
		t.Fatalf("Unlock called %d times, want 1", lk.unlocked)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) || errors.Is(cause, dlock.ErrNotHeld) {
		t.Fatalf("cause after release = %v, want plain context.Canceled", cause)
	}
}

// The guarded context carries the lock: fn reaches its fence.
func TestLockFrom(t *testing.T) {
	lk := newFakeLock()
	ctx, release := dlock.Guard(context.Background(), lk)
	defer release()
	if got, ok := dlock.LockFrom(ctx); !ok || got != dlock.Lock(lk) {
		t.Fatalf("LockFrom(guarded) = %v, %v", got, ok)
	}
	if _, ok := dlock.LockFrom(context.Background()); ok {
		t.Fatal("LockFrom of a bare context reports a lock")
	}
}

// Do's error, when fn failed and the hold ended too, is one line that
// matches both.
func TestDoErrorOneLine(t *testing.T) {
	lk := newFakeLock()
	boom := errors.New("boom")
	err := dlock.Do(context.Background(), oneLock{lk}, "k", func(ctx context.Context) error {
		lk.end(&dlock.LostError{Key: "k", Err: dlock.ErrOwnershipLost})
		<-ctx.Done()
		return boom
	})
	if !errors.Is(err, boom) || !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do = %v, want fn's error and the loss", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("Do's error spans lines: %q", err)
	}
}

// oneLock is a Locker that hands out one fake lock.
type oneLock struct{ lk *fakeLock }

func (o oneLock) TryLock(context.Context, string, ...dlock.Option) (dlock.Lock, error) {
	return o.lk, nil
}
func (o oneLock) Lock(context.Context, string, ...dlock.Option) (dlock.Lock, error) { return o.lk, nil }
func (o oneLock) Unlock(context.Context, string) error                              { return nil }
func (o oneLock) Close() error                                                      { return nil }
