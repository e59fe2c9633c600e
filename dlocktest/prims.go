package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// multiKey: groups of callers lock three keys, named in opposite orders,
// over and over on several Lockers; every call finishes (no deadlock) and
// no key has two holders at once. TryLockAll on a busy set takes nothing.
func (s *suite) multiKey(t *testing.T) {
	ctx := s.context(t)
	base := key(t)
	keys := []string{base + ":a", base + ":b", base + ":c"}
	reversed := []string{keys[2], keys[1], keys[0]}
	var inside [3]atomic.Int32
	var wg sync.WaitGroup
	const lockers, rounds = 2, 3
	for i := range lockers {
		l := s.locker(t)
		for _, order := range [][]string{keys, reversed} {
			wg.Go(func() {
				for range rounds {
					err := dlock.DoAll(ctx, l, order, func(context.Context) error {
						for j := range inside {
							if n := inside[j].Add(1); n != 1 {
								return fmt.Errorf("%d holders of %q at once", n, keys[j])
							}
						}
						time.Sleep(time.Millisecond) // the work
						for j := range inside {
							inside[j].Add(-1)
						}
						return nil
					}, dlock.WithWait(2*s.h.bound()))
					if err != nil {
						t.Errorf("Locker %d, order %v: %v", i, order, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()

	a, b := s.locker(t), s.locker(t)
	held := mustLock(t)(a.TryLock(ctx, keys[1]))
	lk, err := dlock.TryLockAll(ctx, b, reversed)
	mustBusy(t)(lk, err)
	mustLock(t)(b.TryLock(ctx, keys[2])).Unlock(ctx) // the first key taken was given back
	held.Unlock(ctx)
	all := mustLock(t)(dlock.TryLockAll(ctx, b, reversed))
	if all.Key() != keys[0]+","+keys[1]+","+keys[2] {
		t.Errorf("Key() = %q, want the keys in order", all.Key())
	}
	mustBusy(t)(a.TryLock(ctx, keys[0]))
	if err := all.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if !isDone(all) || !errors.Is(all.Err(), dlock.ErrNotHeld) {
		t.Errorf("after Unlock: Done closed %v, Err %v", isDone(all), all.Err())
	}
	mustLock(t)(a.TryLock(ctx, keys[0])).Unlock(ctx)
	if _, err := dlock.LockAll(ctx, a, nil); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("LockAll of no keys: %v, want ErrInvalidKey", err)
	}
}

func (s *suite) semaphore(t *testing.T) {
	ctx := s.context(t)
	sem := func() dlock.Semaphore { return declared[dlock.Semaphore](t, s.locker(t), "a semaphore") }
	a, b, c := sem(), sem(), sem()
	k := key(t)
	p1 := mustLock(t)(a.TryAcquire(ctx, k, 2))
	p2 := mustLock(t)(b.TryAcquire(ctx, k, 2))
	mustBusy(t)(c.TryAcquire(ctx, k, 2))
	got := make(chan error, 1)
	go func() {
		lk, err := c.Acquire(ctx, k, 2, dlock.WithWait(s.h.bound()))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	if err := p1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a waiter after a release: %v", err)
	}
	// A lowered limit keeps the holders above it.
	p3 := mustLock(t)(a.TryAcquire(ctx, k, 2))
	mustBusy(t)(c.TryAcquire(ctx, k, 1))
	if p2.Err() != nil || p3.Err() != nil {
		t.Fatalf("holders lost their permits when the limit was lowered: %v, %v", p2.Err(), p3.Err())
	}
	p2.Unlock(ctx)
	mustBusy(t)(c.TryAcquire(ctx, k, 1)) // p3 still out: not fewer than 1
	p3.Unlock(ctx)
	// A permit that is not renewed comes back after its lease.
	mustLock(t)(a.TryAcquire(ctx, k, 1, dlock.WithLease(s.h.leaseTTL())))
	mustLock(t)(b.Acquire(ctx, k, 1, dlock.WithWait(s.h.bound()))).Unlock(ctx)
	for _, limit := range []int{0, -1, dlock.MaxLimit + 1} {
		lk, err := a.TryAcquire(ctx, k, limit)
		if lk != nil || !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("limit %d: (%v, %v), want ErrInvalidOption", limit, lk, err)
		}
	}
	ran := false
	err := dlock.Do(ctx, dlock.Permits(a, 1), k, func(fctx context.Context) error {
		ran = true
		mustBusy(t)(b.TryAcquire(ctx, k, 1))
		return nil
	})
	if err != nil || !ran {
		t.Errorf("Do under a permit: ran %v, %v", ran, err)
	}
	mustLock(t)(b.TryAcquire(ctx, k, 1)).Unlock(ctx)
}

func (s *suite) rwLock(t *testing.T) {
	ctx := s.context(t)
	rw := func() dlock.RWLocker { return declared[dlock.RWLocker](t, s.locker(t), "a read-write lock") }
	a, b, c := rw(), rw(), rw()
	k := key(t)
	r1 := mustLock(t)(a.TryRLock(ctx, k))
	r2 := mustLock(t)(b.TryRLock(ctx, k))
	mustBusy(t)(c.TryWLock(ctx, k))
	// A waiting writer holds back new readers, and is woken by the last
	// reader's release.
	got := make(chan dlock.Lock, 1)
	go func() {
		lk, err := c.WLock(ctx, k, dlock.WithWait(s.h.bound()))
		if err != nil {
			t.Errorf("waiting writer: %v", err)
		}
		got <- lk
	}()
	newcomer := rw()
	deadline := time.Now().Add(s.h.bound())
	for {
		lk, err := newcomer.TryRLock(ctx, k)
		if err != nil {
			break // the writer queued: a new reader waits behind it
		}
		lk.Unlock(ctx)
		if time.Now().After(deadline) {
			t.Fatal("new readers still get in while a writer waits")
		}
		time.Sleep(10 * time.Millisecond) // until the writer queues; bounded above
	}
	r1.Unlock(ctx)
	r2.Unlock(ctx)
	var w dlock.Lock
	select {
	case w = <-got:
	case <-time.After(s.h.bound()):
		t.Fatal("the writer was not woken by the readers' release")
	}
	if w == nil {
		return
	}
	mustBusy(t)(a.TryRLock(ctx, k))
	mustBusy(t)(b.TryWLock(ctx, k))
	if err := dlock.Downgrade(ctx, w); err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if w.Err() != nil {
		t.Fatalf("Downgrade ended the hold: %v", w.Err())
	}
	mustLock(t)(a.TryRLock(ctx, k)).Unlock(ctx)
	mustBusy(t)(b.TryWLock(ctx, k))
	w.Unlock(ctx)

	octx := dlock.ContextWithOwner(ctx, "dlocktest-owner-"+driver.NewToken())
	r := mustLock(t)(a.TryRLock(octx, k))
	start := time.Now()
	lk, err := b.WLock(octx, k, dlock.WithWait(s.h.bound()))
	if lk != nil || !errors.Is(err, dlock.ErrUpgrade) || time.Since(start) > s.h.bound()/2 {
		t.Errorf("an owner's upgrade: (%v, %v) after %v, want ErrUpgrade at once", lk, err, time.Since(start))
	}
	r.Unlock(octx)
	mustLock(t)(b.TryWLock(ctx, k)).Unlock(ctx)
}
