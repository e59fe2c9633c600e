package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
)

// watchBound is how long a test waits for a watch to say something.
const watchBound = 10 * time.Second

// watcher returns l as a driver.Watcher, or fails t.
func watcher(t *testing.T, l dlock.Locker) driver.Watcher {
	t.Helper()
	w, ok := l.(driver.Watcher)
	if !ok {
		t.Fatalf("%T does not implement driver.Watcher", l)
	}
	return w
}

// fires fails t unless ch receives a value within watchBound.
func fires(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the watch closed", what)
		}
	case <-time.After(watchBound):
		t.Fatalf("%s: the watch said nothing for %v", what, watchBound)
	}
}

// closes fails t unless ch is closed within watchBound; values before
// that are drained.
func closes(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	timeout := time.After(watchBound)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: the watch's channel was not closed within %v", what, watchBound)
		}
	}
}

// drain takes a value that ch holds, if any.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// onEvery waits until every server's lock key of key is set (set) or
// not, so that the replies of the nodes a call did not wait for have
// landed, for at most 10 seconds: a request that a node did not answer in
// time may never run there, and the test goes on without it.
func onEvery(t *testing.T, servers []*redistest.Server, key string, set bool) {
	t.Helper()
	cs := clients(t, servers)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		all := true
		for _, c := range cs {
			n, err := c.Exists(context.Background(), "dlock:lock:"+key).Result()
			if err != nil || (n == 1) != set {
				all = false
				break
			}
		}
		if all {
			return
		}
	}
}

// A watch fires once in place, then when another Locker acquires the
// key and when it releases it.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	servers := shared[:3]
	l, other := newLocker(t, servers), newLocker(t, servers)
	k := keyFor(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := watcher(t, l).Watch(wctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	fires(t, ch, "in place")
	lk, err := other.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after an acquisition")
	onEvery(t, servers, k, true)
	drain(ch)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after a release")
	onEvery(t, servers, k, false)
	drain(ch)

	// An acquisition by an owner, and the hand-over to a waiter.
	owned, err := other.TryLock(ctx, k, dlock.WithOwner("watch-owner"))
	if err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after an owner's acquisition")
	onEvery(t, servers, k, true)
	waiter := newLocker(t, servers)
	got := make(chan dlock.Lock, 1)
	go func() {
		lk, err := waiter.Lock(ctx, k, dlock.WithWait(watchBound))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- lk
	}()
	dlocktest.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
		info, err := l.Inspect(ctx, k)
		return err == nil && info.Waiters > 0
	})
	drain(ch)
	if err := owned.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after the hand-over to a waiter")
	if lk := <-got; lk != nil {
		lk.Unlock(ctx)
	}

	cancel()
	closes(t, ch, "after its context ended")
}

// A watch's channel closes when its Locker closes; Watch refuses a bad
// key and a closed Locker, and starts nothing then.
func TestWatchCloseAndBadInput(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared[:3])
	w := watcher(t, l)
	if ch, err := w.Watch(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) || ch != nil {
		t.Errorf("Watch of an empty key: (%v, %v), want ErrInvalidKey and no channel", ch, err)
	}
	ch, err := w.Watch(ctx, keyFor(t))
	if err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "in place")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closes(t, ch, "after Close")
	if ch, err := w.Watch(ctx, keyFor(t)); !errors.Is(err, dlock.ErrClosed) || ch != nil {
		t.Errorf("Watch on a closed Locker: (%v, %v), want ErrClosed and no channel", ch, err)
	}
}

// With a node paused, a watch still comes in place (it stops waiting for
// that node's subscription) and fires on the majority's changes.
func TestWatchNodePaused(t *testing.T) {
	ctx := context.Background()
	s := start(t, 3)
	l, other := newLocker(t, s), newLocker(t, s)
	if err := s[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer s[2].Resume()
	k := keyFor(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := watcher(t, l).Watch(wctx, k)
	if err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "in place, a node paused")
	lk, err := other.TryLock(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after an acquisition, a node paused")
	onEvery(t, s[:2], k, true)
	drain(ch)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fires(t, ch, "after a release, a node paused")
}
