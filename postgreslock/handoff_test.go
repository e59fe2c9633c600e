package postgreslock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// waiting starts l.Lock(key) on a goroutine, with its fallback attempt a
// minute away (only a release's hand-off brings the lock), and returns
// its result's channel once the waiter is registered (n waiters in all).
func waiting(t *testing.T, l dlock.Locker, key string, n int, opts ...dlock.Option) <-chan lockResult {
	t.Helper()
	got := make(chan lockResult, 1)
	go func() {
		lk, err := l.Lock(context.Background(), key, append([]dlock.Option{dlock.WithWait(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Minute))}, opts...)...)
		got <- lockResult{lk, err}
	}()
	in := newLocker(t, pool(t, ""))
	dlocktest.Eventually(t, 20*time.Second, "the waiter's registration", func() bool {
		info, err := in.Inspect(context.Background(), key)
		return err == nil && info.Waiters == n
	})
	return got
}

type lockResult struct {
	lk  dlock.Lock
	err error
}

// take waits up to d for a waiting call's result, and fails t when it
// has none or an error.
func take(t *testing.T, got <-chan lockResult, d time.Duration) dlock.Lock {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		return r.lk
	case <-time.After(d):
		t.Fatalf("the waiter did not get the lock within %v", d)
	}
	return nil
}

// A release hands the lock to the first waiter in the same transaction:
// the waiter's wake-up names its fence, and it sends no acquisition of
// its own.
func TestHandOffGrantsTheFirstWaiter(t *testing.T) {
	ctx := context.Background()
	var c counter
	w := newLocker(t, countedPool(t, shared.URL(""), &c, 4))
	a := newLocker(t, pool(t, ""))
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := waiting(t, w, t.Name(), 1, dlock.WithTTL(time.Minute))
	before := c.n.Load()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, got, 20*time.Second)
	defer lk.Unlock(ctx)
	if sent := c.n.Load() - before; sent != 0 {
		t.Errorf("the waiter sent %d statements between the release and holding the lock; want 0 (the release grants it)", sent)
	}
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d, one above the releaser's", lk.Fence(), held.Fence()+1)
	}
	other := newLocker(t, pool(t, ""))
	if _, err := other.TryLock(ctx, t.Name()); err == nil {
		t.Fatal("another Locker took the key the waiter holds")
	}
}
