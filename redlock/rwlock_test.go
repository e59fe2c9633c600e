package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// rw returns l as a dlock.RWLocker, or fails t.
func rw(t *testing.T, l dlock.Locker) dlock.RWLocker {
	t.Helper()
	r, ok := l.(dlock.RWLocker)
	if !ok {
		t.Fatalf("%T does not implement dlock.RWLocker", l)
	}
	return r
}

func mustHold(t *testing.T, what string) func(dlock.Lock, error) dlock.Lock {
	return func(lk dlock.Lock, err error) dlock.Lock {
		t.Helper()
		if err != nil || lk == nil {
			t.Fatalf("%s: (%v, %v), want a hold", what, lk, err)
		}
		return lk
	}
}

func mustBeBusy(t *testing.T, what string) func(dlock.Lock, error) {
	return func(lk dlock.Lock, err error) {
		t.Helper()
		if err == nil {
			lk.Unlock(context.Background())
			t.Fatalf("%s: got the hold, want ErrNotAcquired", what)
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: %v, want ErrNotAcquired", what, err)
		}
	}
}

// With one node of three paused, readers overlap, a writer excludes
// readers and writers, and every hold's fence is above the fences of the
// holds that ended before it began.
func TestRWLockMinorityDown(t *testing.T) {
	ctx := context.Background()
	s := start(t, 3)
	a, b, c := rw(t, newLocker(t, s)), rw(t, newLocker(t, s)), rw(t, newLocker(t, s))
	if err := s[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer s[2].Resume()
	k := keyFor(t)
	var fence uint64
	above := func(what string, lk dlock.Lock) {
		t.Helper()
		if lk.Fence() <= fence {
			t.Errorf("%s: fence %d after %d", what, lk.Fence(), fence)
		}
		fence = max(fence, lk.Fence())
	}

	w := mustHold(t, "writer")(a.TryWLock(ctx, k))
	above("writer", w)
	mustBeBusy(t, "reader beside a writer")(b.TryRLock(ctx, k))
	mustBeBusy(t, "writer beside a writer")(b.TryWLock(ctx, k))
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r1 := mustHold(t, "first reader")(b.TryRLock(ctx, k))
	r2 := mustHold(t, "second reader")(c.TryRLock(ctx, k))
	above("first reader", r1)
	above("second reader", r2)
	mustBeBusy(t, "writer beside readers")(a.TryWLock(ctx, k))
	r1.Unlock(ctx)
	mustBeBusy(t, "writer beside a reader")(a.TryWLock(ctx, k))
	r2.Unlock(ctx)
	w = mustHold(t, "writer after the readers")(a.TryWLock(ctx, k))
	above("writer after the readers", w)
	w.Unlock(ctx)
}

// Read and write holds are renewed by the watchdog on a majority, with a
// node paused, and their TTL is the majority's; the watchdog's renewal
// finds a hold the nodes forgot, which is then lost.
func TestRWLockRenewedAndLost(t *testing.T) {
	t.Parallel() // servers of its own; it waits on leases
	ctx := context.Background()
	s := start(t, 3)
	l := rw(t, newLocker(t, s))
	if err := s[0].Pause(); err != nil {
		t.Fatal(err)
	}
	defer s[0].Resume()
	// A renewal every ttl/3 must land within the lease: at 300ms, a
	// machine loaded past its cores (make test's other packages) lost one.
	const ttl = time.Second
	for _, write := range []bool{false, true} {
		k := keyFor(t)
		take := l.TryRLock
		if write {
			take = l.TryWLock
		}
		lk := mustHold(t, "hold")(take(ctx, k, dlock.WithTTL(ttl)))
		select {
		case <-lk.Done():
			t.Fatalf("write %v: lost with 2 of 3 nodes up: %v", write, lk.Err())
		case <-time.After(4 * ttl):
		}
		if d, err := lk.TTL(ctx); err != nil || d <= ttl/2 {
			t.Errorf("write %v: TTL after four leases = %v, %v; want over %v", write, d, err, ttl/2)
		}
		if err := lk.Refresh(ctx, 2*ttl); err != nil {
			t.Errorf("write %v: Refresh: %v", write, err)
		}
		for _, c := range clients(t, s[1:]) {
			if err := c.Del(ctx, "dlock:rw:"+k).Err(); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), dlock.ErrLockLost) {
				t.Errorf("write %v: a forgotten hold ended with %v, want ErrLockLost", write, lk.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("write %v: a forgotten hold was not lost", write)
		}
	}
}

// An owner that holds a read lock, and a Locker that holds one without
// owner, get ErrUpgrade at once when they ask for the write lock.
func TestRWLockUpgrade(t *testing.T) {
	ctx := context.Background()
	a, b := rw(t, newLocker(t, shared[:3])), rw(t, newLocker(t, shared[:3]))
	k := keyFor(t)
	r := mustHold(t, "reader")(a.TryRLock(ctx, k))
	for name, try := range map[string]func(context.Context, string, ...dlock.Option) (dlock.Lock, error){"TryWLock": a.TryWLock, "WLock": a.WLock} {
		if lk, err := try(ctx, k, dlock.WithWait(time.Minute)); lk != nil || !errors.Is(err, dlock.ErrUpgrade) {
			t.Errorf("%s of the Locker's own reader: (%v, %v), want ErrUpgrade", name, lk, err)
		}
	}
	r.Unlock(ctx)

	octx := dlock.ContextWithOwner(ctx, "owner-"+keyFor(t))
	r = mustHold(t, "owner's reader")(a.TryRLock(octx, k))
	start := time.Now()
	if lk, err := b.WLock(octx, k, dlock.WithWait(time.Minute)); lk != nil || !errors.Is(err, dlock.ErrUpgrade) {
		t.Errorf("an owner's upgrade: (%v, %v), want ErrUpgrade", lk, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("an owner's upgrade took %v, want at once", took)
	}
	r2 := mustHold(t, "owner's second reader")(b.TryRLock(octx, k))
	r2.Unlock(octx)
	r.Unlock(octx)
	mustHold(t, "writer")(b.TryWLock(ctx, k)).Unlock(ctx)
}

// Close releases the Locker's read and write holds; RUnlock and WUnlock
// release the Locker's own.
func TestRWLockCloseAndUnlock(t *testing.T) {
	ctx := context.Background()
	l, other := newLocker(t, shared[:3]), rw(t, newLocker(t, shared[:3]))
	a := rw(t, l)
	kr, kw := keyFor(t), keyFor(t)
	mustHold(t, "reader")(a.TryRLock(ctx, kr))
	mustHold(t, "writer")(a.TryWLock(ctx, kw))
	if err := a.WUnlock(ctx, kr); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("WUnlock of a read hold: %v, want ErrNotHeld", err)
	}
	if err := a.RUnlock(ctx, kr); err != nil {
		t.Errorf("RUnlock: %v", err)
	}
	mustHold(t, "writer after RUnlock")(other.TryWLock(ctx, kr)).Unlock(ctx)
	r := mustHold(t, "reader again")(a.TryRLock(ctx, kr))
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(r.Err(), dlock.ErrClosed) {
		t.Errorf("a read hold after Close: %v, want ErrClosed", r.Err())
	}
	mustHold(t, "writer after Close")(other.TryWLock(ctx, kr)).Unlock(ctx)
	mustHold(t, "writer after Close")(other.TryWLock(ctx, kw)).Unlock(ctx)
	if _, err := a.TryRLock(ctx, kr); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("TryRLock on a closed Locker: %v, want ErrClosed", err)
	}
}

// A write hold lapses like a lock: UnlockAfter keeps readers out until
// the lapse, on a majority.
func TestRWLockUnlockAfter(t *testing.T) {
	ctx := context.Background()
	a, b := rw(t, newLocker(t, shared[:3])), rw(t, newLocker(t, shared[:3]))
	k := keyFor(t)
	w := mustHold(t, "writer")(a.TryWLock(ctx, k))
	const d = 1500 * time.Millisecond
	before := time.Now()
	if err := lapser(t, w).UnlockAfter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if !done(w) || !errors.Is(w.Err(), dlock.ErrNotHeld) {
		t.Fatalf("after UnlockAfter: Done closed %v, Err %v", done(w), w.Err())
	}
	lk, err := b.TryRLock(ctx, k)
	if time.Since(before) < d {
		mustBeBusy(t, "reader within the lapse")(lk, err)
	} else if err == nil {
		lk.Unlock(ctx)
	}
	for end := before.Add(d + 10*time.Second); ; time.Sleep(10 * time.Millisecond) {
		lk, err := b.TryRLock(ctx, k)
		if err == nil {
			if took := time.Since(before); took < d-2*time.Millisecond {
				t.Errorf("a reader came in %v after UnlockAfter(%v)", took, d)
			}
			lk.Unlock(ctx)
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(end) {
			t.Fatalf("a reader after the lapse: %v", err)
		}
	}
}

// Redlock offers no semaphore: a majority of independent masters cannot
// bound the permits (see the package doc), so the Locker must not pass
// for a dlock.Semaphore, and it declares why.
func TestNoSemaphore(t *testing.T) {
	l := newLocker(t, shared[:3])
	if _, ok := any(l).(dlock.Semaphore); ok {
		t.Fatalf("%T implements dlock.Semaphore: a majority of independent masters cannot bound permits", l)
	}
	err := driver.Supports(l, driver.FeatureSemaphore)
	var ue *driver.UnsupportedError
	if !errors.Is(err, errors.ErrUnsupported) || !errors.As(err, &ue) || !strings.Contains(ue.Reason, "majority") {
		t.Errorf("driver.Supports(semaphore) = %v, want an *UnsupportedError that gives the reason", err)
	}
	for _, f := range []driver.Feature{driver.FeatureRWLock, driver.FeatureWatch, driver.FeatureLapse, driver.FeatureInspect} {
		if err := driver.Supports(l, f); err != nil {
			t.Errorf("driver.Supports(%v) = %v, want nil", f, err)
		}
	}
}

// Readers and writers on four Lockers, each a party of its own (an
// owner), waiting on one key: a writer is never inside with anyone else, readers do come in together, and every
// waiter gets its turn.
func TestRWLockExclusion(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%dnodes", n), func(t *testing.T) { rwExclusion(t, n) })
	}
}

func rwExclusion(t *testing.T, n int) {
	ctx := context.Background()
	k := keyFor(t)
	var (
		mu               sync.Mutex
		readers, writers int
		overlapped       bool // two readers were inside at once
		errs             []error
		wg               sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	const rounds = 8
	for i := range 4 {
		l := rw(t, newLocker(t, shared[:n]))
		for _, write := range []bool{false, true} {
			// each goroutine a party of its own
			ctx := dlock.ContextWithOwner(ctx, fmt.Sprintf("%s:%d:%v", k, i, write))
			wg.Go(func() {
				for range rounds {
					take := l.RLock
					if write {
						take = l.WLock
					}
					lk, err := take(ctx, k, dlock.WithWait(time.Minute))
					if err != nil {
						fail(fmt.Errorf("Locker %d, write %v: %w", i, write, err))
						return
					}
					mu.Lock()
					if write {
						writers++
						if writers > 1 || readers > 0 {
							errs = append(errs, fmt.Errorf("a writer inside with %d writers and %d readers", writers, readers))
						}
					} else {
						readers++
						if writers > 0 {
							errs = append(errs, fmt.Errorf("a reader inside with %d writers", writers))
						}
						overlapped = overlapped || readers > 1
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond) // the work under the hold
					mu.Lock()
					if write {
						writers--
					} else {
						readers--
					}
					mu.Unlock()
					if err := lk.Unlock(ctx); err != nil {
						fail(fmt.Errorf("Locker %d, write %v: Unlock: %w", i, write, err))
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
		t.Fatal("readers and writers did not all get their turns")
	}
	for _, err := range errs {
		t.Error(err)
	}
	if !overlapped {
		t.Log("no two readers happened to be inside at once")
	}
}
