package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/observe"
)

// cell is one operation of the matrix, run on one kind of hold.
type cell struct {
	name    string
	column  string         // the table's column it counts for; "": its kind's
	feature driver.Feature // what the Locker must offer besides its kind's
	exclude bool           // meaningful only for a kind that excludes
	only    string         // meaningful only for this kind
	fn      func(s *suite, t *testing.T, k holdKind)
}

// cells are the operations of the matrix, each run on every kind of hold
// it means something for.
var cells = []cell{
	{name: "TryLock", fn: (*suite).cellTryLock},
	{name: "Lock", fn: (*suite).cellLock},
	{name: "WaitLimit", fn: (*suite).cellWaitLimit},
	{name: "EndedContext", fn: (*suite).cellEndedContext},
	{name: "Refresh", fn: (*suite).cellRefresh},
	{name: "Expiry", fn: (*suite).cellExpiry},
	{name: "Guard", fn: (*suite).cellGuard},
	{name: "Close", fn: (*suite).cellClose},
	{name: "Observer", fn: (*suite).cellObserver},
	{name: "UnlockAfter", column: colLapse, feature: driver.FeatureLapse, fn: (*suite).cellUnlockAfter},
	{name: "RunOnce", column: colRunOnce, exclude: true, fn: (*suite).cellRunOnce},
	{name: "Election", column: colElection, exclude: true, fn: (*suite).cellElection},
	{name: "Watch", column: colWatch, feature: driver.FeatureWatch, only: "lock", fn: (*suite).cellWatch},
	{name: "Observe", column: colElection, feature: driver.FeatureWatch, only: "lock", fn: (*suite).cellObserve},
	{name: "Inspect", column: colInspect, feature: driver.FeatureInspect, only: "lock", fn: (*suite).cellInspect},
}

// opponent returns a fresh Locker's view of kind k that finds a key busy
// while another party holds it as k.
func (s *suite) opponent(t *testing.T, k holdKind) dlock.Locker { return k.rivalOf(s.locker(t)) }

// cellTryLock: TryLock takes a free key; another party finds it busy
// (a reader finds another reader welcome); Unlock ends the handle and
// frees the key.
func (s *suite) cellTryLock(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	lk := mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key))
	if lk.Err() != nil || isDone(lk) || lk.Token() == "" {
		t.Fatalf("a fresh hold: Err %v, Done closed %v, Token %q", lk.Err(), isDone(lk), lk.Token())
	}
	mustBusy(t)(s.opponent(t, k).TryLock(ctx, key))
	if k.shared {
		mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key)).Unlock(ctx)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if !isDone(lk) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
		t.Errorf("after Unlock: Done closed %v, Err %v; want closed, ErrNotHeld", isDone(lk), lk.Err())
	}
	wantErr(t, "Unlock twice", lk.Unlock(ctx), dlock.ErrNotHeld)
	mustLock(t)(s.opponent(t, k).TryLock(ctx, key)).Unlock(ctx)
}

// cellLock: a waiting Lock gets the key once its holder releases it.
func (s *suite) cellLock(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	lk := mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key))
	got := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		w, err := s.opponent(t, k).Lock(ctx, key, dlock.WithWait(s.h.bound()))
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	<-started
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting Lock: %v", err)
		}
	case <-time.After(2 * s.h.bound()):
		t.Fatal("the waiting Lock did not get the released key")
	}
}

// cellWaitLimit: Lock on a busy key gives up after its WithWait limit,
// with ErrNotAcquired and no context error.
func (s *suite) cellWaitLimit(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	defer mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key)).Unlock(ctx)
	const limit = 200 * time.Millisecond
	start := time.Now()
	lk, err := s.opponent(t, k).Lock(ctx, key, dlock.WithWait(limit))
	took := time.Since(start)
	mustBusy(t)(lk, err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("a wait that ran out: %v; want no context error", err)
	}
	if took < limit || took > limit+s.h.bound() {
		t.Errorf("the wait took %v; want between %v and %v", took, limit, limit+s.h.bound())
	}
}

// cellRefresh: Refresh sets a held lease; after Unlock it matches
// ErrNotHeld.
func (s *suite) cellRefresh(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	ttl := max(5*time.Second, 2*s.h.minTTL())
	lk := mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key, dlock.WithLease(ttl)))
	if err := lk.Refresh(ctx, 2*ttl); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if d, err := lk.TTL(ctx); err != nil || d <= ttl || d > 2*ttl {
		t.Errorf("TTL() after Refresh(%v) = %v, %v; want in (%v, %v]", 2*ttl, d, err, ttl, 2*ttl)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wantErr(t, "Refresh after Unlock", lk.Refresh(ctx, ttl), dlock.ErrNotHeld)
}

// cellEndedContext: TryLock and Lock under a context that ended before
// the call take nothing and say so as for a wait that ran out: a
// *dlock.NotAcquiredError matching ErrNotAcquired and the context's error
// (an election's campaign, or Do, tells "not now" from "broken" by it).
func (s *suite) cellEndedContext(t *testing.T, k holdKind) {
	ctx, cancel := context.WithCancel(s.context(t))
	cancel()
	key := key(t)
	l := k.of(s.locker(t))
	for name, call := range map[string]func(context.Context, string, ...dlock.Option) (dlock.Lock, error){"TryLock": l.TryLock, "Lock": l.Lock} {
		lk, err := call(ctx, key)
		var na *dlock.NotAcquiredError
		if lk != nil || !errors.As(err, &na) || !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context: (%v, %v), want a *dlock.NotAcquiredError matching ErrNotAcquired and context.Canceled", name, lk, err)
		}
	}
	mustLock(t)(l.TryLock(s.context(t), key)).Unlock(s.context(t))
}

// cellExpiry: a lease nobody renews passes to another party once it has
// run out; its holder's Unlock then matches ErrNotHeld.
func (s *suite) cellExpiry(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	ttl := s.h.leaseTTL()
	lk := mustLock(t)(k.of(s.locker(t)).TryLock(ctx, key, dlock.WithLease(ttl)))
	next := mustLock(t)(s.opponent(t, k).Lock(ctx, key, dlock.WithWait(s.h.bound()+ttl)))
	defer next.Unlock(ctx)
	wantErr(t, "Unlock of a lapsed hold", lk.Unlock(ctx), dlock.ErrNotHeld)
}

// cellGuard: dlock.Do holds the key while fn runs, hands fn the lock,
// and releases it when fn returns.
func (s *suite) cellGuard(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	ran := false
	err := dlock.Do(ctx, k.of(s.locker(t)), key, func(fnCtx context.Context) error {
		ran = true
		if _, ok := dlock.LockFrom(fnCtx); !ok {
			t.Error("fn's context carries no lock")
		}
		mustBusy(t)(s.opponent(t, k).TryLock(ctx, key)) // not fnCtx: it carries Do's owner
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do: %v, ran %v", err, ran)
	}
	mustLock(t)(s.opponent(t, k).TryLock(ctx, key)).Unlock(ctx)
}

// cellClose: Close releases the Locker's holds: Done closes, Err matches
// ErrClosed, and another party takes the key.
func (s *suite) cellClose(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	a := s.h.New(t)
	lk := mustLock(t)(k.of(a).TryLock(ctx, key))
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitDone(t, lk, s.h.bound())
	wantErr(t, "Err() of a hold released by Close", lk.Err(), dlock.ErrClosed)
	mustLock(t)(s.opponent(t, k).TryLock(ctx, key)).Unlock(ctx)
}

// cellObserver: the observer of dlock.WithObserver hears of the hold's
// acquisition and of its release, whatever its kind; for the locks of
// dlock.LockAll, of each key's.
func (s *suite) cellObserver(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	var rec Recorder
	l := k.of(s.locker(t, dlock.WithObserver(&rec)))
	lk := mustLock(t)(l.TryLock(ctx, key))
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	keys := []string{key}
	if a, ok := l.(allOf); ok {
		keys = a.parts(key)
	}
	for _, key := range keys {
		evs := rec.WaitFor(t, key, s.h.bound(), "the release", func(evs []observe.Event) bool {
			_, ok := Last(evs, observe.Release)
			return ok
		})
		first, last := evs[0], evs[len(evs)-1]
		if len(keys) == 1 {
			checkAcquired(t, first, lk, false)
		} else if first.Kind != observe.Acquire || first.Outcome != observe.Acquired || first.Lock == nil {
			t.Errorf("first event of %q: %s %s (a hold %v); want Acquire acquired, with its hold", key, first.Kind, first.Outcome, first.Lock != nil)
		}
		if last.Lock != first.Lock || last.Err != nil {
			t.Errorf("Release of %q: of the acquired hold %v, err %v; want true, nil", key, last.Lock == first.Lock, last.Err)
		}
	}
}

// cellUnlockAfter: UnlockAfter(d) ends the handle as released at once,
// and the key stays taken until d has passed, even once the Locker is
// closed.
func (s *suite) cellUnlockAfter(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	a := s.h.New(t)
	defer a.Close()
	// A lease far longer than the lapse and the wait below: a lapse that
	// does not shorten it keeps the key past the wait.
	d := 3 * s.h.leaseTTL()
	lk := mustLock(t)(k.of(a).TryLock(ctx, key, dlock.WithTTL(d+2*s.h.bound())))
	lapser, ok := lk.(driver.Lapser)
	if !ok {
		t.Fatalf("the Locker declares UnlockAfter, but its %s hold %T is no driver.Lapser", k.name, lk)
	}
	start := time.Now()
	if err := lapser.UnlockAfter(ctx, d); err != nil {
		t.Fatalf("UnlockAfter(%v): %v", d, err)
	}
	if !isDone(lk) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
		t.Errorf("after UnlockAfter: Done closed %v, Err %v; want closed, ErrNotHeld", isDone(lk), lk.Err())
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := s.opponent(t, k)
	if lk, err := b.TryLock(ctx, key); time.Since(start) < d/2 {
		mustBusy(t)(lk, err)
	} else if err == nil {
		lk.Unlock(ctx)
	}
	next := mustLock(t)(b.Lock(ctx, key, dlock.WithWait(d+s.h.bound())))
	defer next.Unlock(ctx)
	if took := time.Since(start); took < d*9/10 {
		t.Errorf("the key was free %v after UnlockAfter(%v)", took, d)
	}
}

// cellRunOnce: a job run with election.RunOnce keeps the key for
// holdAtLeast, even once its Locker is closed; another host's RunOnce in
// that time does not run, and one after it does.
func (s *suite) cellRunOnce(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	a := s.h.New(t)
	defer a.Close()
	hold := 3 * s.electionTTL()
	ran := 0
	start := time.Now()
	job := func(context.Context) error { ran++; return nil }
	if err := election.RunOnce(ctx, k.of(a), key, hold, job); err != nil || ran != 1 {
		t.Fatalf("RunOnce: %v, ran %d times", err, ran)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := k.of(s.locker(t))
	err := election.RunOnce(ctx, b, key, hold, job)
	if time.Since(start) < hold/2 && (!errors.Is(err, dlock.ErrNotAcquired) || ran != 1) {
		t.Fatalf("a second RunOnce within the hold: %v, ran %d times; want ErrNotAcquired and no run", err, ran)
	}
	Eventually(t, hold+s.h.bound(), "a RunOnce after the hold to run", func() bool {
		return election.RunOnce(ctx, b, key, 0, job) == nil
	})
	if took := time.Since(start); took < hold*9/10 {
		t.Errorf("the key was free %v after the job began, want at least %v", took, hold)
	}
}

// cellElection: a campaign waits while another leads, and leads once the
// leader resigns.
func (s *suite) cellElection(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	var es [2]*election.Election
	for i := range es {
		e, err := election.New(k.of(s.locker(t)), key, dlock.WithTTL(s.electionTTL()))
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	first, err := es[0].Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	type result struct {
		ld  *election.Leadership
		err error
	}
	got := make(chan result, 1)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // reports to got alone: t may have ended when it returns
		ld, err := es[1].Campaign(cctx, "b")
		got <- result{ld, err}
	}()
	if err := first.Resign(ctx); err != nil {
		stop()
		<-got
		t.Fatalf("Resign: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the second Campaign: %v", r.err)
		}
		ld := r.ld
		if ld.Value() != "b" || ld.Err() != nil {
			t.Errorf("the second leadership: value %q, Err %v", ld.Value(), ld.Err())
		}
		ld.Resign(ctx)
	case <-time.After(2 * s.h.bound()):
		t.Fatal("the second Campaign did not lead after the first resigned")
	}
}

// cellWatch: a watch fires once in place, then after a release of the
// key by another Locker (an acquisition is not announced on every store),
// and its channel closes when its context ends.
func (s *suite) cellWatch(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	w := declared[driver.Watcher](t, s.locker(t), "Watch")
	lk := mustLock(t)(s.locker(t).TryLock(ctx, key))
	wctx, cancel := context.WithCancel(ctx)
	ch, err := w.Watch(wctx, key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next := func(what string) {
		t.Helper()
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the watch's channel closed", what)
			}
		case <-time.After(s.h.bound()):
			t.Fatalf("%s: the watch said nothing for %v", what, s.h.bound())
		}
	}
	next("in place")
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next("after a release")
	cancel()
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(s.h.bound()):
		t.Fatal("the watch's channel stayed open after its context ended")
	}
}

// cellObserve: election.Observe reports a leader and the vacancy after
// its resignation.
func (s *suite) cellObserve(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	e, _ := s.election(t, key)
	octx, cancel := context.WithCancel(ctx)
	obs, err := e.Observe(octx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	defer func() { // the observer ends before its Locker is closed
		cancel()
		for range obs {
		}
	}()
	if l := s.next(t, obs, "at first"); l.Elected {
		t.Fatalf("at first: %+v, want vacant", l)
	}
	ld, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l := s.next(t, obs, "after the campaign"); !l.Elected || l.Value != "a" {
		t.Fatalf("after the campaign: %+v, want a", l)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := s.next(t, obs, "after the resignation"); l.Elected {
		t.Fatalf("after the resignation: %+v, want vacant", l)
	}
}

// cellInspect: Inspect shows a held key held and a released one free.
func (s *suite) cellInspect(t *testing.T, k holdKind) {
	ctx, key := s.context(t), key(t)
	l := s.locker(t)
	in := declared[dlock.Inspector](t, l, "inspection")
	lk := mustLock(t)(l.TryLock(ctx, key))
	if info, err := in.Inspect(ctx, key); err != nil || !info.Held || info.TTL <= 0 {
		t.Errorf("Inspect of a held key: %+v, %v; want held with a lease", info, err)
	}
	lk.Unlock(ctx)
	if info, err := in.Inspect(ctx, key); err != nil || info.Held {
		t.Errorf("Inspect of a released key: %+v, %v; want free", info, err)
	}
}
