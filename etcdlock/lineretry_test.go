package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/observe"
)

// A waiter in line whose attempt fails (etcd did not answer the take
// after the release woke it) tries again after the retry delay: the
// release that woke it was its only wake-up, so waiting for the watch
// again would leave it waiting on a free lock until its wait ran out.
func TestLineRetriesAfterFailedTake(t *testing.T) {
	t.Parallel()
	var f faultyKV
	cli := faultyClient(t, f.unary)
	var rec dlocktest.Recorder
	waiter := newLocker(t, cli, dlock.WithObserver(&rec))
	holder := newLocker(t, client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "line:retry:" + driver.NewToken()[:6]

	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const wait = 15 * time.Second
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, key, dlock.WithWait(wait))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	rec.WaitFor(t, key, 10*time.Second, "waiting", func(evs []observe.Event) bool {
		for _, e := range evs {
			if e.Kind == observe.Wait {
				return true
			}
		}
		return false
	})
	f.failTxn.Store(true) // the take that the release wakes fails, unsent
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter, its take failed once, on a free lock: %v", err)
	}
	if f.failTxn.Load() {
		t.Fatal("the waiter's take did not fail: the test forced nothing")
	}
}

// A waiter in line whose take failed, and whose cleanup of the key that
// take may have written could not reach etcd either, takes the lock under
// another name: the cleanup goes on in the background, and when it lands
// it must not delete the hold that the waiter made meanwhile.
func TestLineRetakesUnderANewName(t *testing.T) {
	t.Parallel()
	var f faultyKV
	cli := faultyClient(t, f.unary)
	var rec dlocktest.Recorder
	waiter := newLocker(t, cli, dlock.WithObserver(&rec), dlock.WithTTL(time.Hour))
	holder := newLocker(t, client(t))
	admin := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "line:rename:" + driver.NewToken()[:6]

	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lock, 1)
	errs := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, key, dlock.WithWait(15*time.Second))
		if err != nil {
			errs <- err
			return
		}
		got <- lk
	}()
	rec.WaitFor(t, key, 10*time.Second, "waiting", func(evs []observe.Event) bool {
		for _, e := range evs {
			if e.Kind == observe.Wait {
				return true
			}
		}
		return false
	})
	f.noDeletes.Store(true)
	f.failTxn.Store(true)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var lk dlock.Lock
	select {
	case lk = <-got:
	case err := <-errs:
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	f.noDeletes.Store(false)
	dlocktest.Eventually(t, 20*time.Second, "the background cleanup landed", func() bool { return f.deleted.Load() > 0 })
	resp, err := admin.Get(ctx, waiter.RangeOf(key)+lk.Token())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Errorf("the waiter's hold after the background cleanup landed: %d keys, want its key", len(resp.Kvs))
	}
}
