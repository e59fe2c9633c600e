package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Run runs the whole contract against the driver that h describes, one
// subtest per rule (see the package doc) and one per cell of the matrix,
// named <kind>/<rule or operation>: kinds lock, permit, read, write and
// multi (several keys). A cell whose feature the driver declares absent
// (see driver.Supports) checks that the absence matches
// errors.ErrUnsupported with a reason. It needs nothing but h: every
// subtest makes its own Lockers and keys.
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := runSuite(t, h, func(s *suite) []subtest {
		tests := []subtest{
			{"lock/Basic", s.basic},
			{"lock/Busy", s.busy},
			{"lock/Expiry", s.expiry},
			{"lock/WaitLimit", s.waitLimit},
			{"lock/WaitCancel", s.waitCancel},
			{"lock/WaitHandOver", s.waitHandOver},
			{"lock/Lost", s.lost},
			{"lock/DoPanic", s.doPanic},
			{"lock/DoLost", s.doLost},
			{"lock/DoClose", s.doClose},
			{"lock/Reentrancy", s.reentrancy},
			{"lock/AlreadyHeld", s.alreadyHeld},
			{"lock/LockerUnlock", s.lockerUnlock},
			{"lock/Fencing", s.fencing},
			{"lock/Refresh", s.refresh},
			{"lock/Close", s.close},
			{"lock/BadInput", s.badInput},
			{"lock/Exclusion", s.exclusion},
			{"lock/Events", s.events},
			{"multi/Orders", s.multiKey},
		}
		l := s.locker(t)
		if driver.Supports(l, driver.FeatureSemaphore) == nil {
			tests = append(tests, subtest{"permit/Rules", s.semaphore})
		}
		if driver.Supports(l, driver.FeatureRWLock) == nil {
			tests = append(tests, subtest{"write/Rules", s.rwLock})
		}
		return tests
	})
	s.runMatrix(t)
}

type suite struct{ h Harness }

// subtest is one rule of a suite.
type subtest struct {
	name string
	fn   func(*testing.T)
}

// runSuite runs the subtests that tests lists, on a suite over h, each in
// parallel with the others.
func runSuite(t *testing.T, h Harness, tests func(*suite) []subtest) *suite {
	t.Helper()
	if h.New == nil {
		t.Fatal("dlocktest: Harness.New is nil")
	}
	s := &suite{h: h}
	for _, tc := range tests(s) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
	return s
}

// locker returns a fresh Locker closed when t ends.
func (s *suite) locker(t *testing.T, opts ...dlock.Option) dlock.Locker {
	t.Helper()
	l := s.h.New(t, opts...)
	if l == nil {
		t.Fatal("dlocktest: Harness.New returned nil")
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// key returns a key of t's own, with a '/' and a ':' in it.
func key(t *testing.T) string {
	return "dlocktest:" + t.Name() + ":" + driver.NewToken()[:8]
}

// context returns a context that ends when t does, bounded by h.bound.
func (s *suite) context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.h.bound())
	t.Cleanup(cancel)
	return ctx
}

// mustLock returns a function that fails t unless it gets a lock:
// mustLock(t)(l.TryLock(ctx, k)).
// declared returns l as T, the interface of a feature the harness
// declares, and fails the test when l does not implement it.
func declared[T any](t *testing.T, l dlock.Locker, feature string) T {
	t.Helper()
	v, ok := l.(T)
	if !ok {
		t.Fatalf("dlocktest: the Locker declares %s, but %T is no %v", feature, l, reflect.TypeFor[T]())
	}
	return v
}

func mustLock(t *testing.T) func(dlock.Lock, error) dlock.Lock {
	return func(lk dlock.Lock, err error) dlock.Lock {
		t.Helper()
		if err != nil {
			t.Fatalf("acquire: got error %v, want a lock", err)
		}
		if lk == nil {
			t.Fatal("acquire: got (nil, nil), want a lock")
		}
		return lk
	}
}

// mustBusy returns a function that fails t unless it gets a
// *NotAcquiredError: mustBusy(t)(l.TryLock(ctx, k)).
func mustBusy(t *testing.T) func(dlock.Lock, error) *dlock.NotAcquiredError {
	return func(lk dlock.Lock, err error) *dlock.NotAcquiredError {
		t.Helper()
		if err == nil {
			if lk != nil {
				lk.Unlock(context.Background())
			}
			t.Fatal("acquire: got the lock, want ErrNotAcquired")
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("acquire: got %v, want an error matching ErrNotAcquired", err)
		}
		var na *dlock.NotAcquiredError
		if !errors.As(err, &na) {
			t.Fatalf("acquire: got %T (%v), want a *dlock.NotAcquiredError", err, err)
		}
		return na
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got %v, want an error matching %v", what, err, target)
	}
}

func isDone(lk dlock.Lock) bool {
	select {
	case <-lk.Done():
		return true
	default:
		return false
	}
}

// waitDone waits up to d for lk's Done.
func waitDone(t *testing.T, lk dlock.Lock, d time.Duration) {
	t.Helper()
	select {
	case <-lk.Done():
	case <-time.After(d):
		t.Fatalf("%q: Done still open after %v", lk.Key(), d)
	}
}

func (s *suite) basic(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	ttl := max(10*time.Second, 2*s.h.minTTL())
	lk := mustLock(t)(a.TryLock(ctx, k, dlock.WithTTL(ttl)))
	if lk.Key() != k {
		t.Errorf("Key() = %q, want %q", lk.Key(), k)
	}
	if lk.Token() == "" {
		t.Error("Token() is empty")
	}
	if lk.Err() != nil || isDone(lk) {
		t.Errorf("a held lock: Err() = %v, Done closed = %v; want nil and open", lk.Err(), isDone(lk))
	}
	if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > ttl {
		t.Errorf("TTL() = %v, %v; want in (0, %v]", d, err, ttl)
	}
	mustBusy(t)(b.TryLock(ctx, k))
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if !isDone(lk) {
		t.Error("Done still open after Unlock")
	}
	wantErr(t, "Err() after Unlock", lk.Err(), dlock.ErrNotHeld)
	if errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("Err() after Unlock = %v, which matches ErrLockLost: a release is not a loss", lk.Err())
	}
	lk2 := mustLock(t)(b.Lock(ctx, k))
	if err := lk2.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func (s *suite) busy(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	ttl := max(10*time.Second, 2*s.h.minTTL())
	lk := mustLock(t)(a.TryLock(ctx, k, dlock.WithTTL(ttl)))
	defer lk.Unlock(ctx)
	lb, err := b.TryLock(ctx, k)
	na := mustBusy(t)(lb, err)
	if na.Key != k {
		t.Errorf("NotAcquiredError.Key = %q, want %q", na.Key, k)
	}
	if na.Err != nil {
		t.Errorf("NotAcquiredError.Err = %v, want nil for a busy TryLock", na.Err)
	}
	if !strings.Contains(err.Error(), k) {
		t.Errorf("error %q does not name the key %q", err, k)
	}
	if s.h.Caps.Has(RetryAfter) && (na.RetryAfter <= 0 || na.RetryAfter > ttl) {
		t.Errorf("RetryAfter = %v, want in (0, %v]", na.RetryAfter, ttl)
	}
	// A busy lock is an error of the same kind for Lock with WithWait(0).
	lb, err = b.Lock(ctx, k, dlock.WithWait(0))
	mustBusy(t)(lb, err)
}

func (s *suite) expiry(t *testing.T) {
	ctx := s.context(t)
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	k := key(t)
	ttl := s.h.leaseTTL()
	la := mustLock(t)(a.TryLock(ctx, k, dlock.WithLease(ttl)))
	lb := mustLock(t)(b.Lock(ctx, k, dlock.WithWait(s.h.bound())))
	defer lb.Unlock(ctx)
	if s.h.Caps.Has(Fencing) && lb.Fence() <= la.Fence() {
		t.Errorf("fence after expiry %d, want > %d", lb.Fence(), la.Fence())
	}
	if s.h.Caps.Has(LostSignal) {
		waitDone(t, la, s.h.bound())
		wantErr(t, "Err() of an expired lock", la.Err(), dlock.ErrLockLost)
	}
	wantErr(t, "Unlock of an expired lock", la.Unlock(ctx), dlock.ErrNotHeld)
	// The stale Unlock deleted nothing: the new holder still holds.
	mustBusy(t)(c.TryLock(ctx, k))
	if lb.Err() != nil {
		t.Errorf("the new holder's Err() = %v after a stale Unlock, want nil", lb.Err())
	}
}

func (s *suite) waitLimit(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	lk := mustLock(t)(a.TryLock(ctx, k))
	defer lk.Unlock(ctx)
	const wait = 200 * time.Millisecond
	start := time.Now()
	lb, err := b.Lock(ctx, k, dlock.WithWait(wait))
	na := mustBusy(t)(lb, err)
	if el := time.Since(start); el < wait {
		t.Errorf("Lock gave up after %v, before its WithWait(%v)", el, wait)
	}
	if na.Err != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait limit is not a context error: got %v", err)
	}

	// WithWait(0) is one attempt: busy at once, and the lock when free.
	mustBusy(t)(b.Lock(ctx, k, dlock.WithWait(0)))
	free := key(t) + "-free"
	mustLock(t)(b.Lock(ctx, free, dlock.WithWait(0))).Unlock(ctx)
}

func (s *suite) waitCancel(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	lk := mustLock(t)(a.TryLock(ctx, k))
	defer lk.Unlock(ctx)

	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	lb, err := b.Lock(dctx, k)
	mustBusy(t)(lb, err)
	wantErr(t, "Lock past its deadline", err, context.DeadlineExceeded)

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	lb, err = b.Lock(cctx, k)
	mustBusy(t)(lb, err)
	wantErr(t, "Lock with a cancelled context", err, context.Canceled)
}

func (s *suite) waitHandOver(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	la := mustLock(t)(a.TryLock(ctx, k))
	type result struct {
		lk  dlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		lk, err := b.Lock(ctx, k, dlock.WithWait(s.h.bound()))
		got <- result{lk, err}
	}()
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	r := <-got
	lb := mustLock(t)(r.lk, r.err)
	if s.h.Caps.Has(Fencing) && lb.Fence() <= la.Fence() {
		t.Errorf("fence %d after hand-over, want > %d", lb.Fence(), la.Fence())
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

func (s *suite) lost(t *testing.T) {
	s.h.needLose(t)
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	lk := mustLock(t)(a.TryLock(ctx, k))
	s.h.Lose(t, k)
	waitDone(t, lk, s.h.bound())
	wantErr(t, "Err() of a lost lock", lk.Err(), dlock.ErrLockLost)
	wantErr(t, "Err() of a lost lock", lk.Err(), dlock.ErrNotHeld)
	var le *dlock.LostError
	if !errors.As(lk.Err(), &le) || le.Key != k {
		t.Errorf("Err() = %#v, want a *dlock.LostError for %q", lk.Err(), k)
	}
	wantErr(t, "Unlock of a lost lock", lk.Unlock(ctx), dlock.ErrNotHeld)
	lb := mustLock(t)(b.TryLock(ctx, k))
	lb.Unlock(ctx)
}

func (s *suite) doPanic(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	ran := false
	got := func() (p any) {
		defer func() { p = recover() }()
		dlock.Do(ctx, a, k, func(context.Context) error {
			ran = true
			panic("dlocktest: boom")
		})
		return nil
	}()
	if !ran {
		t.Fatal("Do did not run fn")
	}
	if got != "dlocktest: boom" {
		t.Fatalf("recovered %v, want the panic of fn", got)
	}
	lb := mustLock(t)(b.TryLock(ctx, k))
	lb.Unlock(ctx)
}

func (s *suite) doLost(t *testing.T) {
	s.h.needLose(t)
	ctx := s.context(t)
	a := s.locker(t)
	k := key(t)
	err := dlock.Do(ctx, a, k, func(fctx context.Context) error {
		s.h.Lose(t, k)
		select {
		case <-fctx.Done():
		case <-time.After(s.h.bound()):
			return errors.New("fn's context still open after the lock was lost")
		}
		if c := context.Cause(fctx); !errors.Is(c, dlock.ErrLockLost) {
			return fmt.Errorf("fn's context ended with cause %v, want ErrLockLost", c)
		}
		return nil
	})
	wantErr(t, "Do after a loss", err, dlock.ErrLockLost)
	if err != nil && strings.Contains(err.Error(), "fn's context") {
		t.Error(err)
	}
}

// doClose: a Locker closed while fn runs under Do releases the hold, and
// fn's context is cancelled with a cause matching ErrClosed: the work must
// stop before another party takes the key.
func (s *suite) doClose(t *testing.T) {
	ctx := s.context(t)
	a := s.h.New(t)
	k := key(t)
	running := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- dlock.Do(ctx, a, k, func(fctx context.Context) error {
			close(running)
			select {
			case <-fctx.Done():
			case <-time.After(s.h.bound()):
				return errors.New("fn's context still open after its Locker closed")
			}
			if c := context.Cause(fctx); !errors.Is(c, dlock.ErrClosed) {
				return fmt.Errorf("fn's context ended with cause %v, want ErrClosed", c)
			}
			return nil
		})
	}()
	select {
	case <-running:
	case err := <-result:
		t.Fatalf("Do returned %v before fn ran", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	err := <-result
	wantErr(t, "Do whose Locker closed", err, dlock.ErrClosed)
	if err != nil && strings.Contains(err.Error(), "fn's context") {
		t.Error(err)
	}
	lb := mustLock(t)(s.locker(t).TryLock(ctx, k))
	lb.Unlock(ctx)
}

func (s *suite) reentrancy(t *testing.T) {
	s.h.need(t, Reentrancy)
	ctx := s.context(t)
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	k := key(t)
	octx := dlock.ContextWithOwner(ctx, "dlocktest-owner-"+driver.NewToken())
	l1 := mustLock(t)(a.TryLock(octx, k))
	l2 := mustLock(t)(b.TryLock(octx, k))                                     // same owner, another Locker
	l3 := mustLock(t)(a.Lock(octx, k))                                        // same owner, same Locker, Lock does not wait
	mustBusy(t)(c.TryLock(ctx, k))                                            // no owner
	mustBusy(t)(c.TryLock(dlock.ContextWithOwner(ctx, "dlocktest-other"), k)) // another owner
	if s.h.Caps.Has(Fencing) && !(l1.Fence() < l2.Fence() && l2.Fence() < l3.Fence()) {
		t.Errorf("fences of reentrant holds %d, %d, %d, want strictly increasing", l1.Fence(), l2.Fence(), l3.Fence())
	}
	// The first co-owner's release leaves the key held for the others
	// (a known bug of counter-based reentrant locks: it deleted the key).
	for i, lk := range []dlock.Lock{l1, l3} {
		if err := lk.Unlock(octx); err != nil {
			t.Fatalf("Unlock of hold %d: %v", i, err)
		}
		mustBusy(t)(c.TryLock(ctx, k))
		if l2.Err() != nil || isDone(l2) {
			t.Fatalf("after releasing hold %d the other hold's Err() = %v", i, l2.Err())
		}
	}
	if _, err := l2.TTL(octx); err != nil {
		t.Errorf("TTL of the last hold: %v", err)
	}
	if err := l2.Unlock(octx); err != nil {
		t.Fatalf("Unlock of the last hold: %v", err)
	}
	lc := mustLock(t)(c.TryLock(ctx, k))
	lc.Unlock(ctx)

	// Do gives fn an owner, so a nested acquisition does not wait on itself.
	err := dlock.Do(ctx, a, k, func(fctx context.Context) error {
		lk, err := a.TryLock(fctx, k)
		if err != nil {
			return fmt.Errorf("nested TryLock inside Do: %w", err)
		}
		return lk.Unlock(fctx)
	})
	if err != nil {
		t.Error(err)
	}
}

func (s *suite) alreadyHeld(t *testing.T) {
	ctx := s.context(t)
	a := s.locker(t)
	k := key(t)
	lk := mustLock(t)(a.TryLock(ctx, k))
	_, err := a.TryLock(ctx, k)
	wantErr(t, "second TryLock on one Locker", err, dlock.ErrAlreadyHeld)
	_, err = a.Lock(ctx, k) // must not wait on itself
	wantErr(t, "second Lock on one Locker", err, dlock.ErrAlreadyHeld)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lk = mustLock(t)(a.TryLock(ctx, k))
	lk.Unlock(ctx)
}

func (s *suite) lockerUnlock(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	lk := mustLock(t)(a.TryLock(ctx, k))
	if err := b.Unlock(ctx, k); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock by a Locker that does not hold the key: got %v, want ErrNotHeld", err)
	}
	if err := a.Unlock(ctx, k); err != nil {
		t.Fatalf("Locker.Unlock: %v", err)
	}
	if !isDone(lk) {
		t.Error("the handle's Done is open after Locker.Unlock")
	}
	wantErr(t, "second Locker.Unlock", a.Unlock(ctx, k), dlock.ErrNotHeld)
	wantErr(t, "Locker.Unlock of a key never held", a.Unlock(ctx, key(t)), dlock.ErrNotHeld)
	lb := mustLock(t)(b.TryLock(ctx, k))
	lb.Unlock(ctx)

	if !s.h.Caps.Has(Reentrancy) {
		return
	}
	octx := dlock.ContextWithOwner(ctx, "dlocktest-owner-"+driver.NewToken())
	l1 := mustLock(t)(a.TryLock(octx, k))
	l2 := mustLock(t)(a.TryLock(octx, k))
	if err := a.Unlock(ctx, k); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Locker.Unlock without the owner: got %v, want ErrNotHeld", err)
	}
	if err := a.Unlock(octx, k); err != nil {
		t.Fatalf("Locker.Unlock for the owner: %v", err)
	}
	if !isDone(l2) || isDone(l1) {
		t.Errorf("Locker.Unlock released the hold made first (Done: first %v, second %v), want the most recent",
			isDone(l1), isDone(l2))
	}
	if err := a.Unlock(octx, k); err != nil {
		t.Fatalf("Locker.Unlock of the last hold: %v", err)
	}
	lb = mustLock(t)(b.TryLock(ctx, k))
	lb.Unlock(ctx)

	// A hold made with WithOwner, whose owner ctx does not carry, is
	// found by a Locker.Unlock whose ctx carries no owner either.
	id := dlock.WithOwner("dlocktest-job-" + driver.NewToken())
	l1 = mustLock(t)(a.TryLock(ctx, k, id))
	l2 = mustLock(t)(a.TryLock(ctx, k, id))
	if err := a.Unlock(ctx, k); err != nil {
		t.Fatalf("Locker.Unlock of a hold made with WithOwner: %v", err)
	}
	if !isDone(l2) || isDone(l1) {
		t.Errorf("Locker.Unlock released the WithOwner hold made first (Done: first %v, second %v), want the most recent",
			isDone(l1), isDone(l2))
	}
	if err := a.Unlock(ctx, k); err != nil {
		t.Fatalf("Locker.Unlock of the last WithOwner hold: %v", err)
	}
	lb = mustLock(t)(b.TryLock(ctx, k))
	lb.Unlock(ctx)
}

func (s *suite) fencing(t *testing.T) {
	s.h.need(t, Fencing)
	ctx := s.context(t)
	ls := []dlock.Locker{s.locker(t), s.locker(t), s.locker(t)}
	k := key(t)
	var last uint64
	for i := range 9 {
		c := ctx
		if i%3 == 2 {
			c = dlock.ContextWithOwner(ctx, fmt.Sprintf("dlocktest-owner-%d", i))
		}
		lk := mustLock(t)(ls[i%3].TryLock(c, k))
		if lk.Fence() <= last {
			t.Errorf("acquisition %d: fence %d, want > %d", i, lk.Fence(), last)
		}
		last = lk.Fence()
		if err := lk.Unlock(c); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

func (s *suite) refresh(t *testing.T) {
	ctx := s.context(t)
	a := s.locker(t)
	k := key(t)
	ttl := max(5*time.Second, 2*s.h.minTTL())
	lk := mustLock(t)(a.TryLock(ctx, k, dlock.WithLease(ttl)))
	if err := lk.Refresh(ctx, 2*ttl); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > 2*ttl {
		t.Errorf("TTL() after Refresh(%v) = %v, %v; want in (0, %v]", 2*ttl, d, err, 2*ttl)
	}
	if err := lk.Refresh(ctx, ttl); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	wantErr(t, "Refresh(0)", lk.Refresh(ctx, 0), dlock.ErrInvalidTTL)
	if lk.Err() != nil {
		t.Fatalf("a bad Refresh changed the lock: Err() = %v", lk.Err())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wantErr(t, "Refresh after Unlock", lk.Refresh(ctx, ttl), dlock.ErrNotHeld)
	_, err := lk.TTL(ctx)
	wantErr(t, "TTL after Unlock", err, dlock.ErrNotHeld)
}

func (s *suite) close(t *testing.T) {
	ctx := s.context(t)
	a, b := s.h.New(t), s.locker(t)
	k1, k2, k3 := key(t), key(t), key(t)
	l1 := mustLock(t)(a.TryLock(ctx, k1))
	l2 := mustLock(t)(a.TryLock(ctx, k2, dlock.WithLease(max(30*time.Second, s.h.minTTL()))))
	l3 := mustLock(t)(b.TryLock(ctx, k3))
	defer l3.Unlock(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Lock(ctx, k3) // waits on b until a closes
		waited <- err
	}()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waited:
		wantErr(t, "a Lock waiting when its Locker closed", err, dlock.ErrClosed)
	case <-time.After(s.h.bound()):
		t.Fatal("a waiting Lock did not return after Close")
	}
	for _, lk := range []dlock.Lock{l1, l2} {
		waitDone(t, lk, s.h.bound())
		wantErr(t, "Err() of a hold released by Close", lk.Err(), dlock.ErrClosed)
		wantErr(t, "Err() of a hold released by Close", lk.Err(), dlock.ErrNotHeld)
		wantErr(t, "Unlock after Close", lk.Unlock(ctx), dlock.ErrNotHeld)
		lb := mustLock(t)(b.TryLock(ctx, lk.Key()))
		lb.Unlock(ctx)
	}
	_, err := a.TryLock(ctx, k1)
	wantErr(t, "TryLock after Close", err, dlock.ErrClosed)
	_, err = a.Lock(ctx, k1)
	wantErr(t, "Lock after Close", err, dlock.ErrClosed)
	wantErr(t, "Locker.Unlock after Close", a.Unlock(ctx, k1), dlock.ErrClosed)
	if err := a.Close(); err != nil && !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("second Close: got %v, want nil or ErrClosed", err)
	}
}

func (s *suite) badInput(t *testing.T) {
	ctx := s.context(t)
	a, b := s.locker(t), s.locker(t)
	k := key(t)
	long := strings.Repeat("k", dlock.MaxKeyLen+1)
	cases := []struct {
		name string
		key  string
		opts []dlock.Option
		want error
	}{
		{"empty key", "", nil, dlock.ErrInvalidKey},
		{"key over MaxKeyLen", long, nil, dlock.ErrInvalidKey},
		{"WithTTL(0)", k, []dlock.Option{dlock.WithTTL(0)}, dlock.ErrInvalidTTL},
		{"negative TTL", k, []dlock.Option{dlock.WithTTL(-time.Second)}, dlock.ErrInvalidTTL},
		{"WithLease(0)", k, []dlock.Option{dlock.WithLease(0)}, dlock.ErrInvalidTTL},
		{"a TTL too short to leave a usable lease", k, []dlock.Option{dlock.WithTTL(2 * time.Millisecond)}, dlock.ErrInvalidTTL},
		{"a retry delay over a day", k, []dlock.Option{dlock.WithRetry(dlock.FixedInterval(200 * 365 * 24 * time.Hour))}, dlock.ErrInvalidOption},
		{"negative wait", k, []dlock.Option{dlock.WithWait(-time.Second)}, dlock.ErrInvalidOption},
		{"WithPrefix on a call", k, []dlock.Option{dlock.WithPrefix("x")}, dlock.ErrInvalidOption},
	}
	if m := s.h.minTTL(); m > dlock.MinTTL {
		cases = append(cases, struct {
			name string
			key  string
			opts []dlock.Option
			want error
		}{"TTL below the backend's minimum", k, []dlock.Option{dlock.WithTTL(m - time.Millisecond)}, dlock.ErrInvalidTTL})
	}
	for _, tc := range cases {
		lk, err := a.TryLock(ctx, tc.key, tc.opts...)
		if lk != nil || !errors.Is(err, tc.want) {
			t.Errorf("TryLock, %s: got (%v, %v), want an error matching %v", tc.name, lk, err, tc.want)
		}
		lk, err = a.Lock(ctx, tc.key, tc.opts...)
		if lk != nil || !errors.Is(err, tc.want) {
			t.Errorf("Lock, %s: got (%v, %v), want an error matching %v", tc.name, lk, err, tc.want)
		}
	}
	wantErr(t, "Locker.Unlock of an empty key", a.Unlock(ctx, ""), dlock.ErrNotHeld)
	// None of the above took the key.
	lk := mustLock(t)(b.TryLock(ctx, k))
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wantErr(t, "second Unlock", lk.Unlock(ctx), dlock.ErrNotHeld)
	// The longest key is fine.
	lk = mustLock(t)(a.TryLock(ctx, long[:dlock.MaxKeyLen]))
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the longest key: %v", err)
	}
	if err := dlock.Do(ctx, nil, k, func(context.Context) error { return nil }); err == nil {
		t.Error("Do with a nil Locker: got nil error")
	}
}

// exclusion: several Lockers, each with several goroutines acting for
// owners of their own, contend for one key. Every holder stays inside for
// a few milliseconds, so that two holders at once would overlap, and
// records its fence, which (capability Fencing) must grow in the order of
// the holds.
func (s *suite) exclusion(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	const lockers, goroutines, rounds = 3, 2, 3
	const hold = 2 * time.Millisecond // how long a holder stays inside
	var (
		inside atomic.Int32
		mu     sync.Mutex
		fences []uint64 // in the order of the holds
		wg     sync.WaitGroup
	)
	for range lockers {
		l := s.locker(t)
		for range goroutines {
			octx := dlock.ContextWithOwner(ctx, "dlocktest-exclusion-"+driver.NewToken())
			wg.Go(func() {
				for range rounds {
					lk, err := l.Lock(octx, k, dlock.WithWait(s.h.bound()))
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					mu.Lock()
					fences = append(fences, lk.Fence())
					mu.Unlock()
					time.Sleep(hold) // the critical section's work
					inside.Add(-1)
					if err := lk.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := len(fences); n != lockers*goroutines*rounds {
		t.Errorf("%d acquisitions, want %d", n, lockers*goroutines*rounds)
	}
	if !s.h.Caps.Has(Fencing) {
		return
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("hold %d has fence %d after %d: fences must grow with every hold", i, fences[i], fences[i-1])
		}
	}
}
