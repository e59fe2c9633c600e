package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/observe"
)

// waitingCount waits until rec has seen n Wait events for key.
func waitingCount(t *testing.T, rec *dlocktest.Recorder, key string, n int) {
	t.Helper()
	rec.WaitFor(t, key, 30*time.Second, fmt.Sprintf("%d waiting", n), func(evs []observe.Event) bool {
		waiting := 0
		for _, e := range evs {
			if e.Kind == observe.Wait {
				waiting++
			}
		}
		return waiting >= n
	})
}

// Waiters are served in the order they came: each joins the line before
// the next one calls Lock, and each releases the lock as soon as it has
// it.
func TestLineOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key, n = "line:order", 6
	cli := client(t)
	holder := newLocker(t, cli)
	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var rec dlocktest.Recorder
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		w := newLocker(t, cli, dlock.WithObserver(&rec))
		go func() {
			lk, err := w.Lock(ctx, key)
			if err == nil {
				order <- i
				err = lk.Unlock(ctx)
			}
			errs <- err
		}()
		waitingCount(t, &rec, key, i+1)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Errorf("waiter %d acquired in turn %d", got, want)
		}
		want++
	}
}

// An owner that holds the lock takes it again at once, ahead of a waiter
// of another owner in line (it would otherwise wait for the waiter, which
// waits for the owner); the waiter gets the lock when the owner's last
// hold goes, not before.
func TestLineReentry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "line:reentry"
	cli := client(t)
	a, b, c := newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)
	var rec dlocktest.Recorder
	waiter := newLocker(t, cli, dlock.WithObserver(&rec))
	first, err := a.Lock(ctx, key, dlock.WithOwner("job-1"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var ownerDone atomic.Bool // set before the owner's last release
	go func() {
		lk, err := waiter.Lock(ctx, key)
		if err == nil {
			if !ownerDone.Load() {
				err = errors.New("acquired while the owner held the lock")
			}
			err = errors.Join(err, lk.Unlock(ctx))
		}
		got <- err
	}()
	waitingCount(t, &rec, key, 1)
	// Lock on a Locker that holds nothing: it joins the line behind the
	// waiter, sees the owner's holds, and joins them.
	second, err := b.Lock(ctx, key, dlock.WithOwner("job-1"), dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("the owner's second Lock, with a waiter in line: %v", err)
	}
	if _, err := c.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of another party while the owner holds twice: %v, want ErrNotAcquired", err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The release wakes the waiter, first in line, whose attempt must
	// fail: the owner still holds the lock.
	rec.WaitFor(t, key, 30*time.Second, "the waiter woken", func(evs []observe.Event) bool {
		_, ok := dlocktest.Last(evs, observe.Wake)
		return ok
	})
	if _, err := c.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of another party while the owner holds once: %v, want ErrNotAcquired", err)
	}
	if info, err := c.Inspect(ctx, key); err != nil || info.Holds != 1 || info.Owner != "job-1" {
		t.Fatalf("Inspect while the owner holds once: %+v, %v; want one hold of job-1", info, err)
	}
	ownerDone.Store(true)
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter, after the owner's last release: %v", err)
	}
}
