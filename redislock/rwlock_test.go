package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
)

// Readers overlap; a writer excludes everyone; fences of readers and
// writers come from one counter.
func TestRWLockExclusion(t *testing.T) {
	ctx := context.Background()
	a, b, c := newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))
	k := keyFor(t)
	r1 := mustHold(t)(a.TryRLock(ctx, k))
	r2 := mustHold(t)(b.TryRLock(ctx, k))
	if r2.Fence() <= r1.Fence() {
		t.Errorf("reader fences %d then %d, want growing", r1.Fence(), r2.Fence())
	}
	mustWait(t)(c.TryWLock(ctx, k))
	r1.Unlock(ctx)
	mustWait(t)(c.TryWLock(ctx, k)) // one reader left
	r2.Unlock(ctx)
	w := mustHold(t)(c.TryWLock(ctx, k))
	if w.Fence() <= r2.Fence() {
		t.Errorf("writer fence %d after reader %d, want growing", w.Fence(), r2.Fence())
	}
	mustWait(t)(a.TryRLock(ctx, k))
	mustWait(t)(b.TryWLock(ctx, k))
	info, err := a.InspectKind(ctx, dlock.KindRWLock, k)
	if err != nil || !info.Held || info.Holds != 1 || info.Readers != 0 {
		t.Errorf("inspect with a writer: %+v, %v", info, err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	mustHold(t)(a.TryRLock(ctx, k)).Unlock(ctx)
}

// A waiting writer is not starved by a constant load of readers that
// overlap hand over hand (each takes its next read lock before it releases
// the last, so the key is never free of readers): once the writer queues,
// new readers wait behind it, the readers inside finish, and the writer
// gets the lock; the readers then go on.
func TestRWLockWriterNotStarved(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readers, writer := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	var wg sync.WaitGroup
	var reads, waited atomic.Int64
	first := make(chan struct{})
	var once sync.Once
	newReader := func() context.Context { return dlock.ContextWithOwner(ctx, driver.NewToken()) } // a newcomer
	for range 3 {
		wg.Go(func() {
			cur, err := readers.RLock(newReader(), k, dlock.WithWait(10*time.Second))
			if err != nil {
				return
			}
			once.Do(func() { close(first) })
			for ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // the read
				next, err := readers.TryRLock(newReader(), k)
				cur.Unlock(context.Background())
				if err != nil { // a writer waits: wait behind it
					waited.Add(1)
					if next, err = readers.RLock(newReader(), k, dlock.WithWait(10*time.Second)); err != nil {
						return
					}
				}
				reads.Add(1)
				cur = next
			}
			cur.Unlock(context.Background())
		})
	}
	within(t, first, 10*time.Second, "the first reader")
	dlocktest.Eventually(t, 10*time.Second, "readers overlapping", func() bool { return reads.Load() > 10 })
	got := make(chan error, 1)
	go func() {
		lk, err := writer.WLock(ctx, k, dlock.WithWait(10*time.Second))
		if err == nil {
			defer lk.Unlock(context.Background())
			// While the writer holds, no reader does.
			var info dlock.Info
			if info, err = writer.InspectKind(ctx, dlock.KindRWLock, k); err == nil && (info.Readers != 0 || info.Holds != 1) {
				err = fmt.Errorf("the writer holds beside %d readers", info.Readers)
			}
		}
		got <- err
	}()
	if err := within(t, got, 15*time.Second, "the writer under a reader load"); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if waited.Load() == 0 {
		t.Error("no reader waited behind the writer")
	}
	before := reads.Load()
	dlocktest.Eventually(t, 10*time.Second, "readers go on after the writer", func() bool { return reads.Load() > before })
	cancel()
	wg.Wait()
}

// A writer that downgrades keeps its hold (token, fence, Done) and becomes
// a reader: other readers come in, writers still wait, and nobody got in
// between.
func TestRWLockDowngrade(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))
	k := keyFor(t)
	w := mustHold(t)(a.TryWLock(ctx, k))
	fence, token := w.Fence(), w.Token()
	waiting := make(chan dlock.Lock, 1)
	go func() {
		lk, err := b.RLock(ctx, k, dlock.WithWait(10*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		if err != nil {
			t.Errorf("waiting reader: %v", err)
		}
		waiting <- lk
	}()
	dlocktest.Eventually(t, 5*time.Second, "the reader queued", func() bool {
		info, err := a.InspectKind(ctx, dlock.KindRWLock, k)
		return err == nil && info.Waiters == 1
	})
	if err := dlock.Downgrade(ctx, w); err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if w.Err() != nil || w.Fence() != fence || w.Token() != token {
		t.Fatalf("after Downgrade: Err %v, fence %d (was %d): want the same hold", w.Err(), w.Fence(), fence)
	}
	r := within(t, waiting, 10*time.Second, "the reader woken by the downgrade") // without its one-minute sleep
	if r != nil {
		defer r.Unlock(ctx)
	}
	info, err := a.InspectKind(ctx, dlock.KindRWLock, k)
	if err != nil || info.Readers != 2 || info.Holds != 2 {
		t.Errorf("after Downgrade: %+v, %v; want two readers", info, err)
	}
	mustWait(t)(newLocker(t, shared).TryWLock(ctx, k))
	if err := dlock.Downgrade(ctx, w); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Downgrade of a read lock: %v, want ErrInvalidOption", err)
	}
	if err := a.RUnlock(ctx, k); err != nil { // the downgraded hold is a's read lock now
		t.Errorf("RUnlock of the downgraded hold: %v", err)
	}
	if w.Err() == nil {
		t.Error("RUnlock did not release the downgraded hold")
	}
	lk := mustHold(t)(a.TryLock(ctx, k))
	if err := dlock.Downgrade(ctx, lk); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Downgrade of a lock: %v, want ErrInvalidOption", err)
	}
	lk.Unlock(ctx)
}

// An upgrade is refused at once, by owner across Lockers and on one
// Locker without owner: it would wait on itself.
func TestRWLockUpgrade(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	octx := dlock.ContextWithOwner(ctx, "job-"+driver.NewToken())
	r := mustHold(t)(a.TryRLock(octx, k))
	for name, try := range map[string]func() (dlock.Lock, error){
		"TryWLock, another Locker": func() (dlock.Lock, error) { return b.TryWLock(octx, k) },
		"WLock, the same Locker":   func() (dlock.Lock, error) { return a.WLock(octx, k, dlock.WithWait(10*time.Second)) },
	} {
		start := time.Now()
		lk, err := try()
		if lk != nil || !errors.Is(err, dlock.ErrUpgrade) {
			t.Errorf("%s: (%v, %v), want ErrUpgrade", name, lk, err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s: refused after %v, want at once", name, el)
		}
	}
	r.Unlock(octx)

	plain := mustHold(t)(a.TryRLock(ctx, k))
	if _, err := a.WLock(ctx, k, dlock.WithWait(10*time.Second)); !errors.Is(err, dlock.ErrUpgrade) {
		t.Errorf("WLock after RLock on one Locker: %v, want ErrUpgrade", err)
	}
	if _, err := a.TryRLock(ctx, k); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Errorf("a second ownerless RLock on one Locker: %v, want ErrAlreadyHeld", err)
	}
	plain.Unlock(ctx)
	mustHold(t)(a.TryWLock(ctx, k)).Unlock(ctx) // nothing was left behind
}

// Reentrancy by owner: a writer's owner may write again and read; another
// owner may not; the key is free when the last hold is released.
func TestRWLockReentrancy(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	octx := dlock.ContextWithOwner(ctx, "job-"+driver.NewToken())
	w1 := mustHold(t)(a.TryWLock(octx, k))
	w2 := mustHold(t)(b.TryWLock(octx, k))
	r := mustHold(t)(b.RLock(octx, k))
	other := dlock.ContextWithOwner(ctx, "other")
	mustWait(t)(a.TryRLock(other, k))
	mustWait(t)(a.TryWLock(other, k))
	for _, lk := range []dlock.Lock{w1, w2} {
		lk.Unlock(octx)
		mustWait(t)(a.TryWLock(other, k))
	}
	mustHold(t)(a.TryRLock(other, k)).Unlock(other) // only the owner's read lock is left
	r.Unlock(octx)
	mustHold(t)(a.TryWLock(other, k)).Unlock(other)
}

// A hold whose key is deleted is lost at its next renewal; a waiting
// reader is woken by the writer's release; Close releases the holds.
func TestRWLockLostAndClose(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	w := mustHold(t)(a.TryWLock(ctx, k, dlock.WithTTL(300*time.Millisecond)))
	if err := shared.Client(t).Del(ctx, "dlock:rw:"+k).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, w.Done(), 5*time.Second, "Done of a deleted write lock")
	if !errors.Is(w.Err(), dlock.ErrLockLost) {
		t.Errorf("Err = %v, want ErrLockLost", w.Err())
	}
	if err := w.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock of a lost hold: %v, want ErrNotHeld", err)
	}

	w = mustHold(t)(a.TryWLock(ctx, k))
	got := make(chan error, 1)
	go func() {
		lk, err := b.RLock(ctx, k, dlock.WithWait(10*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	dlocktest.Eventually(t, 5*time.Second, "the reader queued", func() bool {
		info, err := a.InspectKind(ctx, dlock.KindRWLock, k)
		return err == nil && info.Waiters == 1
	})
	if err := a.WUnlock(ctx, k); err != nil {
		t.Fatalf("WUnlock: %v", err)
	}
	if !errors.Is(w.Err(), dlock.ErrNotHeld) || errors.Is(w.Err(), dlock.ErrLockLost) {
		t.Errorf("after WUnlock: Err %v, want released", w.Err())
	}
	if err := within(t, got, 10*time.Second, "the reader woken by the release"); err != nil {
		t.Fatalf("reader: %v", err)
	}
	if err := a.RUnlock(ctx, k); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("RUnlock with no read lock: %v, want ErrNotHeld", err)
	}

	r := mustHold(t)(a.TryRLock(ctx, k))
	if err := a.WUnlock(ctx, k); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("WUnlock of a read lock: %v, want ErrNotHeld", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(r.Err(), dlock.ErrClosed) {
		t.Errorf("a read lock after Close: %v, want ErrClosed", r.Err())
	}
	mustHold(t)(b.TryWLock(ctx, k)).Unlock(ctx)
	if _, err := a.TryRLock(ctx, k); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("TryRLock after Close: %v, want ErrClosed", err)
	}
}

// A hold granted to a waiter lives its whole lease even when the holds
// that were there before it end sooner: here readers granted by a
// writer's Downgrade outlive the writer's short lease.
func TestRWLockGrantOutlivesOlderHolds(t *testing.T) {
	ctx := context.Background()
	a, r, n := newLocker(t, shared), newLocker(t, shared), newLocker(t, shared)
	k := keyFor(t)
	w := mustHold(t)(a.TryWLock(ctx, k, dlock.WithLease(400*time.Millisecond))) // the keys expired with this one
	got := make(chan dlock.Lock, 1)
	go func() {
		lk, err := r.RLock(ctx, k, dlock.WithWait(10*time.Second), dlock.WithRetry(dlock.FixedInterval(2*time.Second)))
		if err != nil {
			t.Errorf("reader: %v", err)
		}
		got <- lk
	}()
	dlocktest.Eventually(t, 5*time.Second, "the reader queued", func() bool {
		info, err := n.InspectKind(ctx, dlock.KindRWLock, k)
		return err == nil && info.Waiters == 1
	})
	if err := dlock.Downgrade(ctx, w); err != nil { // grants the reader, for its claim window of seconds
		t.Fatalf("Downgrade: %v", err)
	}
	lk := within(t, got, 5*time.Second, "the reader's grant")
	if lk == nil {
		return
	}
	within(t, w.Done(), 5*time.Second, "the end of the writer's lease")
	var info dlock.Info
	dlocktest.Eventually(t, 5*time.Second, "the reader alone, after the writer's lease ended on the server", func() bool {
		var err error
		info, err = n.InspectKind(ctx, dlock.KindRWLock, k)
		return err == nil && info.Holds == 1 && info.Readers == 1
	})
	if lk.Err() != nil {
		t.Fatalf("the reader's hold after the writer's lease ended: %+v; Err %v", info, lk.Err())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
