package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// multiKeys returns n keys of the test, sorted.
func multiKeys(t testing.TB, n int) []string {
	base := keyFor(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%c", base, 'a'+i)
	}
	return keys
}

// lockKeysExist counts the lock keys of keys, and their holds, that exist.
func lockKeysExist(t *testing.T, c redis.Cmdable, keys []string) int64 {
	t.Helper()
	var names []string
	for _, k := range keys {
		ks, err := redisnode.Of("dlock", k)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ks.Lock, ks.Holds)
	}
	n, err := c.Exists(context.Background(), names...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// LockAll of keys in one slot (every key, on one server) takes them all in
// one round trip and releases them all in one.
func TestLockAllRoundTrips(t *testing.T) {
	ctx := context.Background()
	hook := &counter{}
	c := shared.Client(t)
	c.AddHook(hook)
	l := newLocker(t, shared)
	l2, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	keys := multiKeys(t, 3)
	// the connection's handshake and the scripts' first load: not counted
	for _, fair := range []bool{false, true} {
		if err := dlock.DoAll(ctx, l2, keys, func(context.Context) error { return nil }, dlock.WithFair(fair)); err != nil {
			t.Fatal(err)
		}
	}
	for _, acquire := range []struct {
		name  string
		f     func() (dlock.Lock, error)
		trips int64
	}{
		{"TryLockAll", func() (dlock.Lock, error) { return dlock.TryLockAll(ctx, l2, keys) }, 1},
		{"LockAll", func() (dlock.Lock, error) { return dlock.LockAll(ctx, l2, keys, dlock.WithWait(time.Second)) }, 1},
		{"LockAll fenced", func() (dlock.Lock, error) { return dlock.LockAll(ctx, l2, keys, dlock.WithFencing(true)) }, 1},
		// fair: one by one, each key's queue asked
		{"LockAll fair", func() (dlock.Lock, error) { return dlock.LockAll(ctx, l2, keys, dlock.WithFair(true)) }, 3},
	} {
		hook.trips.Store(0)
		lk, err := acquire.f()
		if err != nil {
			t.Fatalf("%s: %v", acquire.name, err)
		}
		if n := hook.trips.Load(); n != acquire.trips {
			t.Errorf("%s of %d keys: %d round trips, want %d", acquire.name, len(keys), n, acquire.trips)
		}
		if _, err := l.TryLock(ctx, keys[1]); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: %s not held: TryLock = %v", acquire.name, keys[1], err)
		}
		hook.trips.Store(0)
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", acquire.name, err)
		}
		if n := hook.trips.Load(); n != 1 {
			t.Errorf("Unlock of %d keys: %d round trips, want 1", len(keys), n)
		}
		if n := lockKeysExist(t, c, keys); n != 0 {
			t.Errorf("%s: %d lock keys left after Unlock", acquire.name, n)
		}
		if !errors.Is(lk.Err(), dlock.ErrNotHeld) {
			t.Errorf("%s: Err after Unlock = %v, want ErrNotHeld", acquire.name, lk.Err())
		}
	}
}

// TryLockAll on a set with a busy key takes nothing, and says which key is
// busy and for how long.
func TestTryLockAllBusyTakesNothing(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	keys := multiKeys(t, 3)
	held, err := a.TryLock(ctx, keys[1], dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	_, err = dlock.TryLockAll(ctx, b, []string{keys[2], keys[0], keys[1]})
	var busy *dlock.NotAcquiredError
	if !errors.As(err, &busy) || busy.Key != keys[1] || busy.RetryAfter <= 0 || busy.RetryAfter > 5*time.Second {
		t.Fatalf("TryLockAll with %s busy: %#v, want a *NotAcquiredError for it with its RetryAfter", keys[1], err)
	}
	if n := lockKeysExist(t, shared.Client(t), []string{keys[0], keys[2]}); n != 0 {
		t.Errorf("%d lock keys of the free keys exist after a busy TryLockAll", n)
	}
	// WithWait bounds the whole acquisition, which ends with the busy key.
	start := time.Now()
	_, err = dlock.LockAll(ctx, b, keys, dlock.WithWait(200*time.Millisecond))
	if !errors.As(err, &busy) || busy.Key != keys[1] {
		t.Fatalf("LockAll with %s busy past its wait: %v, want a *NotAcquiredError for it", keys[1], err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("LockAll with a 200ms wait returned after %v", d)
	}
	if n := lockKeysExist(t, shared.Client(t), []string{keys[0], keys[2]}); n != 0 {
		t.Errorf("%d lock keys of the free keys exist after a LockAll that gave up", n)
	}
}

// A LockAll that finds a key busy waits for it, and has every key once its
// holder lets go.
func TestLockAllWaitsForBusyKey(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	keys := multiKeys(t, 2)
	held, err := a.TryLock(ctx, keys[1])
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := dlock.LockAll(ctx, b, keys, dlock.WithWait(20*time.Second))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	ks, _ := redisnode.Of("dlock", keys[1])
	raw := shared.Client(t)
	dlocktest.Eventually(t, 10*time.Second, "LockAll queues on the busy key", func() bool {
		return raw.Exists(ctx, ks.Queue).Val() == 1
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := within(t, got, 20*time.Second, "LockAll after the release"); err != nil {
		t.Fatalf("LockAll: %v", err)
	}
}

// Callers that lock the same keys in opposite orders, on several Lockers,
// all finish, and no key ever has two holders.
func TestLockAllOppositeOrders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := multiKeys(t, 3)
	reversed := slices.Clone(keys)
	slices.Reverse(reversed)
	var inside [3]atomic.Int32
	var wg sync.WaitGroup
	const lockers, rounds = 3, 5
	for range lockers {
		l := newLocker(t, shared)
		for _, order := range [][]string{keys, reversed, {keys[1], keys[2]}} {
			wg.Go(func() {
				for range rounds {
					err := dlock.DoAll(ctx, l, order, func(context.Context) error {
						for _, k := range order {
							j := slices.Index(keys, k)
							if n := inside[j].Add(1); n != 1 {
								return fmt.Errorf("%d holders of %s at once", n, k)
							}
						}
						for _, k := range order {
							inside[slices.Index(keys, k)].Add(-1)
						}
						return nil
					}, dlock.WithWait(30*time.Second))
					if err != nil {
						t.Errorf("order %v: %v", order, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// The loss of any one key ends the whole hold.
func TestLockAllLossOfOneKey(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	keys := multiKeys(t, 3)
	lk, err := dlock.LockAll(ctx, l, keys, dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := redisnode.Of("dlock", keys[1])
	if err := shared.Client(t).Del(ctx, ks.Lock).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), 10*time.Second, "Done after a key was deleted")
	if !errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("Err = %v, want ErrLockLost", lk.Err())
	}
	var lost *dlock.LostError
	if !errors.As(lk.Err(), &lost) || lost.Key != keys[1] {
		t.Errorf("Err = %v, want the loss of %s", lk.Err(), keys[1])
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock after the loss: %v, want ErrNotHeld", err)
	}
	if n := lockKeysExist(t, shared.Client(t), []string{keys[0], keys[2]}); n != 0 {
		t.Errorf("%d lock keys of the keys not lost left after Unlock", n)
	}
}

// With WithFencing, each key of a LockAll gets its own fence, above every
// earlier fence of that key; the handle's Fence is the highest.
func TestLockAllFencing(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	keys := multiKeys(t, 2)
	var before []uint64
	for _, k := range keys {
		lk, err := l.TryLock(ctx, k, dlock.WithFencing(true))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, lk.Fence())
		lk.Unlock(ctx)
	}
	lk, err := dlock.LockAll(ctx, l, keys, dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	m := lk.(*dlock.MultiLock)
	var highest uint64
	for i, each := range m.Locks() {
		if each.Key() != keys[i] {
			t.Errorf("Locks()[%d] is %s, want %s", i, each.Key(), keys[i])
		}
		if each.Fence() <= before[i] {
			t.Errorf("fence of %s = %d, not above its earlier %d", keys[i], each.Fence(), before[i])
		}
		highest = max(highest, each.Fence())
	}
	if lk.Fence() != highest {
		t.Errorf("Fence() = %d, want the highest, %d", lk.Fence(), highest)
	}
	fences := m.Locks()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		after, err := l.TryLock(ctx, k, dlock.WithFencing(true))
		if err != nil {
			t.Fatal(err)
		}
		if after.Fence() <= fences[i].Fence() {
			t.Errorf("fence of %s after LockAll = %d, not above %d", k, after.Fence(), fences[i].Fence())
		}
		after.Unlock(ctx)
	}
}

// An owner that holds one of the keys enters it again: the key stays held
// by the owner until both holds are released.
func TestLockAllOwnerReentry(t *testing.T) {
	ctx := dlock.ContextWithOwner(context.Background(), "job-7")
	l, other := newLocker(t, shared), newLocker(t, shared)
	keys := multiKeys(t, 2)
	first, err := l.Lock(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	all, err := dlock.TryLockAll(ctx, l, keys)
	if err != nil {
		t.Fatalf("TryLockAll by the owner of %s: %v", keys[0], err)
	}
	if err := all.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryLock(context.Background(), keys[0]); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("%s free while its owner's first hold is held: %v", keys[0], err)
	}
	first.Unlock(ctx)
	if n := lockKeysExist(t, shared.Client(t), keys); n != 0 {
		t.Errorf("%d lock keys left after every hold was released", n)
	}
}

// TryLockMulti refuses no keys and a key named twice, and takes nothing.
func TestTryLockMultiBadInput(t *testing.T) {
	ctx := dlock.ContextWithOwner(context.Background(), "job-8")
	l := newLocker(t, shared)
	keys := multiKeys(t, 2)
	for _, bad := range [][]string{nil, {keys[0], keys[1], keys[0]}} {
		if _, err := l.TryLockMulti(ctx, bad); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("TryLockMulti(%q): %v, want ErrInvalidKey", bad, err)
		}
	}
	if n := lockKeysExist(t, shared.Client(t), keys); n != 0 {
		t.Errorf("%d lock keys exist after refused calls", n)
	}
	if err := l.Unlock(ctx, keys[0]); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock of %s after refused calls: %v, want ErrNotHeld", keys[0], err)
	}
}
