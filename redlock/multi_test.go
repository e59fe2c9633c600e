package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// dlock.LockAll over Redlock takes the keys by the generic ordered path,
// each key a majority lock: callers that name the same keys in opposite
// orders, on two Lockers and two goroutines each, always finish, no key
// has two holders at once, and each key's fences rise from holder to
// holder.
func TestLockAllOppositeOrders(t *testing.T) {
	ctx := context.Background()
	servers := shared[:3]
	base := keyFor(t)
	keys := []string{base + ":a", base + ":b", base + ":c"}
	reversed := []string{keys[2], keys[1], keys[0]}
	var (
		mu     sync.Mutex
		holder [3]string // the caller holding each key, "" when free
		fences [3]uint64 // the last fence of each key
		errs   []error
		wg     sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	const rounds = 5
	for i := range 2 {
		l := newLocker(t, servers)
		for o, order := range [][]string{keys, reversed} {
			me := fmt.Sprintf("Locker %d, order %d", i, o)
			wg.Go(func() {
				for range rounds {
					lk, err := dlock.LockAll(ctx, l, order, dlock.WithWait(time.Minute))
					if err != nil {
						fail(fmt.Errorf("%s: LockAll: %w", me, err))
						return
					}
					ml, ok := lk.(*dlock.MultiLock)
					if !ok {
						fail(fmt.Errorf("%s: LockAll returned a %T, want a *dlock.MultiLock", me, lk))
						return
					}
					byKey := map[string]dlock.Lock{}
					for _, k := range ml.Locks() {
						byKey[k.Key()] = k
					}
					mu.Lock()
					for j, k := range keys {
						if holder[j] != "" {
							errs = append(errs, fmt.Errorf("%s took %q, which %s holds", me, k, holder[j]))
						}
						holder[j] = me
						if f := byKey[k].Fence(); f <= fences[j] {
							errs = append(errs, fmt.Errorf("%s: fence %d of %q after %d", me, f, k, fences[j]))
						} else {
							fences[j] = f
						}
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // the work under the locks
					mu.Lock()
					for j := range holder {
						holder[j] = ""
					}
					mu.Unlock()
					if err := lk.Unlock(ctx); err != nil {
						fail(fmt.Errorf("%s: Unlock: %w", me, err))
						return
					}
				}
			})
		}
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		t.Fatal("callers locking the keys in opposite orders did not finish")
	}
	for _, err := range errs {
		t.Error(err)
	}
}

// TryLockAll over Redlock takes every key or none: on a set with a busy
// key it fails with that key's busy error and gives back the keys it took
// before it.
func TestTryLockAll(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared[:3]), newLocker(t, shared[:3])
	base := keyFor(t)
	keys := []string{base + ":a", base + ":b", base + ":c"}
	held, err := a.TryLock(ctx, keys[1])
	if err != nil {
		t.Fatal(err)
	}
	lk, err := dlock.TryLockAll(ctx, b, []string{keys[2], keys[1], keys[0]})
	var na *dlock.NotAcquiredError
	if lk != nil || !errors.As(err, &na) || na.Key != keys[1] {
		t.Fatalf("TryLockAll with %q busy: (%v, %v), want its *dlock.NotAcquiredError", keys[1], lk, err)
	}
	first, err := a.TryLock(ctx, keys[0]) // given back
	if err != nil {
		t.Fatalf("the key TryLockAll took before the busy one was not given back: %v", err)
	}
	first.Unlock(ctx)
	held.Unlock(ctx)
	all, err := dlock.TryLockAll(ctx, b, keys)
	if err != nil {
		t.Fatalf("TryLockAll of free keys: %v", err)
	}
	for _, k := range keys {
		if _, err := a.TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("TryLock of %q under TryLockAll: %v, want ErrNotAcquired", k, err)
		}
	}
	if err := all.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		lk, err := a.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("TryLock of %q after the Unlock of all: %v", k, err)
		}
		lk.Unlock(ctx)
	}
}
