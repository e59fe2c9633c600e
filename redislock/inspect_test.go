package redislock

import (
	"context"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

func TestInspect(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l, err := New(s.Client(t), dlock.WithPrefix("ins"), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	info, err := l.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if want := (dlock.Info{Key: "job", FenceKnown: true, WaitersKnown: true}); info != want {
		t.Fatalf("free, never locked: got %+v, want %+v", info, want)
	}

	lk, err := l.TryLock(ctx, "job", dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err = l.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != "" || info.Holds != 1 || info.Fence != lk.Fence() || !info.FenceKnown || !info.WaitersKnown || info.TTL <= 0 || info.TTL > 5*time.Second {
		t.Fatalf("held plain lock: got %+v, want held, 1 hold, fence %d, 0 < TTL <= 5s", info, lk.Fence())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = l.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Fence != lk.Fence() || info.TTL != 0 {
		t.Fatalf("released: got %+v, want free with fence %d kept", info, lk.Fence())
	}

	// An owner's lock with two holds.
	a, err := l.TryLock(ctx, "job", dlock.WithOwner("deploy-7"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryLock(ctx, "job", dlock.WithOwner("deploy-7"))
	if err != nil {
		t.Fatal(err)
	}
	info, err = l.Inspect(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != "deploy-7" || info.Holds != 2 || info.Fence != b.Fence() {
		t.Fatalf("owner lock with two holds: got %+v, want owner deploy-7, 2 holds, fence %d", info, b.Fence())
	}
	a.Unlock(ctx)
	b.Unlock(ctx)

	if _, err := l.Inspect(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("empty key: got %v, want ErrInvalidKey", err)
	}
}

func TestInspectForeignValue(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := s.Client(t)
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Another program following the single-instance algorithm, and one
	// that forgot the TTL.
	c.Set(ctx, "dlock:lock:a", "their-token", 10*time.Second)
	c.Set(ctx, "dlock:lock:b", "their-token", 0)
	info, err := l.Inspect(ctx, "a")
	if err != nil || !info.Held || info.Owner != "" || info.TTL <= 0 {
		t.Fatalf("foreign lock with TTL: got %+v, %v", info, err)
	}
	info, err = l.Inspect(ctx, "b")
	if err != nil || !info.Held || info.TTL != -1 {
		t.Fatalf("foreign lock without TTL: got %+v, %v; want TTL -1", info, err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	// A prefix with glob characters must be matched literally.
	l, err := New(s.Client(t), dlock.WithPrefix("a*b"), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := New(s.Client(t), dlock.WithPrefix("aXb"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, k := range []string{"job:2", "job:1", "cron", "{tag}x"} {
		if _, err := l.TryLock(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.TryLock(ctx, "job:3"); err != nil {
		t.Fatal(err)
	}
	freed, err := l.TryLock(ctx, "job:4")
	if err != nil {
		t.Fatal(err)
	}
	freed.Unlock(ctx) // leaves its fence counter behind, which is no lock

	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"", []string{"cron", "job:1", "job:2", "{tag}x"}},
		{"job:*", []string{"job:1", "job:2"}},
		{"nothing*", nil},
	} {
		infos, err := l.List(ctx, tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, i := range infos {
			if !i.Held || i.TTL <= 0 || i.Fence == 0 {
				t.Errorf("List(%q): %+v is not a held lock with a TTL and a fence", tc.pattern, i)
			}
			got = append(got, i.Key)
		}
		if len(got) != len(tc.want) || (len(got) > 0 && !equal(got, tc.want)) {
			t.Errorf("List(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestForceUnlock(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	holder, err := New(s.Client(t), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := New(s.Client(t), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	op, err := New(s.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()

	if _, err := op.ForceUnlock(ctx, "stuck"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("force unlock of a free key: got %v, want ErrNotHeld", err)
	}
	lk, err := holder.TryLock(ctx, "stuck", dlock.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// A waiter queues with a long fallback sleep: only the hand-off can
	// wake it in time.
	got := make(chan dlock.Lock, 1)
	go func() {
		w, err := waiter.Lock(ctx, "stuck", dlock.WithRetry(dlock.FixedInterval(time.Minute)), dlock.WithWait(20*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := op.Inspect(ctx, "stuck")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by deadline
	}

	info, err := op.ForceUnlock(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Fence != lk.Fence() || info.Holds != 1 || info.TTL <= 0 {
		t.Fatalf("force unlock reported %+v, want the held lock with fence %d", info, lk.Fence())
	}
	select {
	case w := <-got:
		if w == nil {
			t.Fatal("waiter failed")
		}
		if w.Fence() <= lk.Fence() {
			t.Fatalf("waiter's fence %d not above the evicted holder's %d", w.Fence(), lk.Fence())
		}
		defer w.Unlock(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), dlock.ErrLockLost) {
			t.Fatalf("evicted holder: Err() = %v, want ErrLockLost", lk.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted holder never learned it lost the lock")
	}
}

// A malformed pattern is refused as on every backend, with an error
// matching path.ErrBadPattern, instead of being sent to SCAN.
func TestListBadPattern(t *testing.T) {
	l := newLocker(t, shared)
	for _, bad := range []string{"a[", `a\`} {
		if infos, err := l.List(context.Background(), bad); !errors.Is(err, path.ErrBadPattern) {
			t.Errorf("List(%q) = %v, %v; want path.ErrBadPattern", bad, infos, err)
		}
	}
}
