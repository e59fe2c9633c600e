package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
)

// RunElection runs the rules of package election against the driver that
// h describes; its Lockers must implement dlock.Inspector, driver.Watcher
// and (for RunOnce's lapse) give locks that implement driver.Lapser, as
// every driver of dlock does (see the table of what works where in the
// README). One subtest per rule:
//
//   - OneLeader: four campaigners, each on a Locker of its own, campaign
//     again and again; never two lead at once, and each epoch is accepted
//     by a fenced log (above every epoch before it); an observer sees only
//     growing epochs.
//   - Observe: an observer sees the first leader, the vacancy after it
//     resigns, the next leader with a greater epoch, and the vacancy when
//     its Locker closes; Leader agrees; the channel closes with its context.
//   - Handover: a leader that resigns hands over to a waiting campaigner
//     on the release's wake-up: well within the waiter's fallback sleep.
//   - ResignDrains: Resign waits for the work started with Go, while the
//     lock stays held and no other campaigner is elected; Go is refused
//     meanwhile.
//   - ResignCut: when Resign's context ends first, the work's context is
//     cancelled, Resign waits for it and then releases, and says why.
//   - Loss (needs Harness.Lose): when the server forgets the lock, the
//     leadership's context ends with a cause matching ErrLockLost, an
//     observer sees the vacancy within the lease, and Resign reports the
//     loss.
//   - RunOnce: a job holds its key at least holdAtLeast from acquisition,
//     also after its Locker closed; meanwhile other Lockers' RunOnce does
//     not run it (ErrNotAcquired); a job longer than that releases when
//     it returns.
//   - BadInput: nil Locker, empty key, an over-long value, a negative hold
//     are refused with the documented errors; Resign twice gives
//     ErrNotHeld, Go after Resign ErrResigned.
func RunElection(t *testing.T, h Harness) {
	t.Helper()
	runSuite(t, h, func(s *suite) []subtest {
		return []subtest{
			{"OneLeader", s.oneLeader},
			{"Observe", s.observe},
			{"Handover", s.handover},
			{"ResignDrains", s.resignDrains},
			{"ResignCut", s.resignCut},
			{"Loss", s.electionLoss},
			{"RunOnce", s.runOnce},
			{"BadInput", s.electionBadInput},
		}
	})
}

// electionTTL is the lease of the campaigns: short, so that a loss shows
// within the test's bounds, but a whole second for etcd.
func (s *suite) electionTTL() time.Duration { return max(s.h.minTTL(), time.Second) }

// election returns an election on key over a fresh Locker.
func (s *suite) election(t *testing.T, key string, opts ...dlock.Option) (*election.Election, dlock.Locker) {
	t.Helper()
	l := s.locker(t)
	e, err := election.New(l, key, append([]dlock.Option{dlock.WithTTL(s.electionTTL())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e, l
}

// next receives the next leader an observer reports, within the bound.
func (s *suite) next(t *testing.T, obs <-chan election.Leader, what string) election.Leader {
	t.Helper()
	select {
	case l, ok := <-obs:
		if !ok {
			t.Fatalf("%s: the observer's channel closed", what)
		}
		return l
	case <-time.After(s.h.bound()):
		t.Fatalf("%s: the observer said nothing for %v", what, s.h.bound())
	}
	return election.Leader{}
}

// observer starts an observer of the election of key, on a Locker of its
// own. stop ends it, as the end of the test does.
func (s *suite) observer(ctx context.Context, t *testing.T, key string) (obs <-chan election.Leader, stop func()) {
	t.Helper()
	e, _ := s.election(t, key)
	octx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	obs, err := e.Observe(octx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return obs, stop
}

// mustLead returns the leadership a campaign won, and fails the test when
// the campaign failed.
func mustLead(t *testing.T) func(*election.Leadership, error) *election.Leadership {
	return func(ld *election.Leadership, err error) *election.Leadership {
		t.Helper()
		if err != nil {
			t.Fatalf("Campaign: %v", err)
		}
		return ld
	}
}

func (s *suite) oneLeader(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	const campaigners, terms = 4, 12
	var (
		leading atomic.Int32
		elected atomic.Int32
		mu      sync.Mutex
		highest uint64   // the fenced log: the highest epoch accepted
		refused []string // epochs it refused
	)
	obs, ostop := s.observer(ctx, t, k)
	var seen []uint64
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for l := range obs {
			if l.Elected {
				seen = append(seen, l.Epoch)
			}
		}
	}()

	// A campaign gives up after patience: long enough for a loaded
	// machine to grant a lease, short enough that campaigns end unelected.
	patience := max(200*time.Millisecond, s.h.leaseTTL())
	var wg sync.WaitGroup
	errs := make(chan error, campaigners)
	for i := range campaigners {
		e, _ := s.election(t, k)
		wg.Go(func() {
			// Until the terms are served, or the test's time is up (a
			// campaign under an ended context fails at once).
			for elected.Load() < terms && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, patience)
				ld, err := e.Campaign(cctx, fmt.Sprintf("campaigner-%d", i))
				cancel()
				if errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, dlock.ErrLeaseExpired) {
					// Not elected in time, or elected by a lease that a
					// loaded machine granted too late: campaign again.
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("campaigner %d: %w", i, err)
					return
				}
				if n := leading.Add(1); n != 1 {
					errs <- fmt.Errorf("campaigner %d elected with epoch %d while %d others lead", i, ld.Epoch(), n-1)
				}
				mu.Lock()
				if ld.Epoch() <= highest {
					refused = append(refused, fmt.Sprintf("%d after %d", ld.Epoch(), highest))
				} else {
					highest = ld.Epoch()
				}
				mu.Unlock()
				elected.Add(1)
				time.Sleep(5 * time.Millisecond) // the leader's work
				leading.Add(-1)
				if err := ld.Resign(ctx); err != nil && !errors.Is(err, dlock.ErrLockLost) {
					// A term may end by the loss of its lease (a
					// keep-alive late on a loaded machine); the
					// resignation of a term the leader still had may not
					// fail.
					errs <- fmt.Errorf("campaigner %d: resign: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(refused) > 0 {
		t.Errorf("the fenced log refused epochs that did not grow: %s", strings.Join(refused, ", "))
	}
	if n := elected.Load(); n < terms {
		t.Errorf("%d terms, want %d", n, terms)
	}
	ostop()
	<-observed
	if len(seen) == 0 {
		t.Error("the observer saw no leader")
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("the observer saw epoch %d after %d", seen[i], seen[i-1])
		}
	}
}

func (s *suite) observe(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	obs, ostop := s.observer(ctx, t, k)
	if l := s.next(t, obs, "before any campaign"); l.Elected {
		t.Fatalf("before any campaign: %v, want vacant", l)
	}

	a, _ := s.election(t, k)
	ldA := mustLead(t)(a.Campaign(ctx, "alpha:1"))
	if l := s.next(t, obs, "after alpha's election"); !l.Elected || l.Value != "alpha:1" || l.Epoch != ldA.Epoch() {
		t.Fatalf("after alpha's election: %v, want %q with epoch %d", l, "alpha:1", ldA.Epoch())
	}
	if l, err := a.Leader(ctx); err != nil || l.Value != "alpha:1" || l.Epoch != ldA.Epoch() {
		t.Fatalf("Leader: %v, %v; want alpha with epoch %d", l, err, ldA.Epoch())
	}
	if err := ldA.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := s.next(t, obs, "after alpha resigned"); l.Elected {
		t.Fatalf("after alpha resigned: %v, want vacant", l)
	}

	b, lb := s.election(t, k)
	ldB := mustLead(t)(b.Campaign(ctx, "beta"))
	l := s.next(t, obs, "after beta's election")
	if !l.Elected || l.Value != "beta" || l.Epoch != ldB.Epoch() || l.Epoch <= ldA.Epoch() {
		t.Fatalf("after beta's election: %v, want %q with epoch %d > %d", l, "beta", ldB.Epoch(), ldA.Epoch())
	}
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if l := s.next(t, obs, "after beta's Locker closed"); l.Elected {
		t.Fatalf("after beta's Locker closed: %v, want vacant", l)
	}
	select {
	case <-ldB.Done():
		if !errors.Is(ldB.Err(), dlock.ErrClosed) {
			t.Errorf("beta's leadership ended with %v, want ErrClosed", ldB.Err())
		}
	case <-time.After(s.h.bound()):
		t.Fatal("beta's leadership did not end when its Locker closed")
	}
	ostop()
	for range obs { // drains, and ends when the observer closes it
	}
}

func (s *suite) handover(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	// A waiter's fallback is min(retry interval, holder's lease): 10s here.
	// The handover must come from the release's wake-up, far sooner.
	const lease = 10 * time.Second
	slow := []dlock.Option{dlock.WithTTL(lease), dlock.WithRetry(dlock.FixedInterval(time.Minute))}
	a, la := s.election(t, k, slow...)
	b, _ := s.election(t, k, slow...)
	in, ok := la.(dlock.Inspector)
	if !ok {
		t.Skip("dlocktest: the Locker is no dlock.Inspector")
	}
	ldA := mustLead(t)(a.Campaign(ctx, "a"))
	elected := make(chan *election.Leadership, 1)
	campaigning := time.Now()
	go func() {
		ld, err := b.Campaign(ctx, "b")
		if err != nil {
			t.Errorf("b: %v", err)
			close(elected)
			return
		}
		elected <- ld
	}()
	// b must be waiting, not about to campaign: once its first attempt
	// found the lock busy, it sleeps on its fallback. A store that counts
	// waiters says so; on another, b's first attempt is given a second.
	Eventually(t, s.h.bound(), "b to wait", func() bool {
		info, err := in.Inspect(ctx, k)
		if err != nil {
			return false
		}
		if info.WaitersKnown {
			return info.Waiters > 0
		}
		return time.Since(campaigning) > time.Second
	})
	start := time.Now()
	if err := ldA.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case ld, ok := <-elected:
		if !ok {
			return
		}
		gap := time.Since(start)
		t.Logf("b elected %v after a resigned", gap)
		if gap > lease/2 {
			t.Errorf("b elected %v after a resigned: not woken by the release (fallback %v)", gap, lease)
		}
		if ld.Epoch() <= ldA.Epoch() {
			t.Errorf("b's epoch %d, a's %d", ld.Epoch(), ldA.Epoch())
		}
		ld.Resign(ctx)
	case <-time.After(lease):
		t.Fatalf("b not elected %v after a resigned", lease)
	}
}

func (s *suite) resignDrains(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	a, _ := s.election(t, k)
	b, _ := s.election(t, k)
	ldA := mustLead(t)(a.Campaign(ctx, "a"))
	finish := make(chan struct{})
	var workCut atomic.Bool
	if err := ldA.Go(func(ctx context.Context) {
		select {
		case <-finish:
		case <-ctx.Done():
			workCut.Store(true)
		}
	}); err != nil {
		t.Fatal(err)
	}
	elected := make(chan *election.Leadership, 1)
	go func() {
		ld, err := b.Campaign(ctx, "b")
		if err == nil {
			elected <- ld
		}
		close(elected)
	}()
	resigned := make(chan error, 1)
	go func() { resigned <- ldA.Resign(ctx) }()
	Eventually(t, s.h.bound(), "Resign to begin", func() bool {
		return errors.Is(ldA.Go(func(context.Context) {}), election.ErrResigned)
	})
	// While the work runs, a leads still: past a renewal of its lease.
	time.Sleep(s.electionTTL() / 2)
	if l, err := a.Leader(ctx); err != nil || l.Epoch != ldA.Epoch() {
		t.Fatalf("while a's work drains: leader %v, %v; want a (epoch %d)", l, err, ldA.Epoch())
	}
	select {
	case <-elected:
		t.Fatal("b elected while a's work still ran")
	case err := <-resigned:
		t.Fatalf("Resign returned %v while the work ran", err)
	default:
	}
	close(finish)
	if err := <-resigned; err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if workCut.Load() {
		t.Error("the work's context ended before the work did")
	}
	if !errors.Is(ldA.Err(), election.ErrResigned) {
		t.Errorf("a's Err after Resign: %v, want ErrResigned", ldA.Err())
	}
	select {
	case ld := <-elected:
		if ld == nil {
			t.Fatal("b's campaign failed")
		}
		ld.Resign(ctx)
	case <-time.After(s.h.bound()):
		t.Fatal("b not elected after a resigned")
	}
}

func (s *suite) resignCut(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	a, _ := s.election(t, k)
	ld := mustLead(t)(a.Campaign(ctx, "a"))
	var cause atomic.Value
	if err := ld.Go(func(ctx context.Context) {
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
	}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := ld.Resign(rctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Resign: %v, want an error matching context.DeadlineExceeded", err)
	}
	if c, _ := cause.Load().(error); !errors.Is(c, election.ErrResigned) {
		t.Errorf("the work's context ended with %v, want ErrResigned", c)
	}
	if l, err := a.Leader(ctx); err != nil || l.Elected {
		t.Errorf("after Resign: leader %v, %v; want vacant", l, err)
	}
}

func (s *suite) electionLoss(t *testing.T) {
	s.h.needLose(t)
	ctx := s.context(t)
	k := key(t)
	a, _ := s.election(t, k)
	obs, _ := s.observer(ctx, t, k)
	s.next(t, obs, "before the campaign")
	ld := mustLead(t)(a.Campaign(ctx, "a"))
	for l := s.next(t, obs, "after the election"); !l.Elected; l = s.next(t, obs, "after the election") {
	}
	s.h.Lose(t, k) // on Redis, nothing is published: the observer sees it when the lease would have run out
	select {
	case <-ld.Done():
	case <-time.After(s.h.bound()):
		t.Fatal("the leadership did not end when the server forgot the lock")
	}
	if !errors.Is(ld.Err(), dlock.ErrLockLost) {
		t.Errorf("the leadership ended with %v, want ErrLockLost", ld.Err())
	}
	if l := s.next(t, obs, "after the loss"); l.Elected {
		t.Errorf("after the loss: %v, want vacant", l)
	}
	if err := ld.Resign(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Resign after the loss: %v, want ErrLockLost", err)
	}
}

func (s *suite) runOnce(t *testing.T) {
	ctx := s.context(t)
	k := key(t)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	in, ok := l3.(dlock.Inspector)
	if !ok {
		t.Skip("dlocktest: the Locker is no dlock.Inspector")
	}
	hold := 2 * s.electionTTL()
	ran := 0
	start := time.Now()
	err := election.RunOnce(ctx, l1, k, hold, func(ctx context.Context) error {
		if _, ok := dlock.LockFrom(ctx); !ok {
			t.Error("the job's context carries no lock")
		}
		ran++
		return nil
	})
	if err != nil || ran != 1 {
		t.Fatalf("RunOnce: %v, ran %d times", err, ran)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	// Another host whose clock fires the same tick later.
	err = election.RunOnce(ctx, l2, k, hold, func(context.Context) error { ran++; return nil })
	if !errors.Is(err, dlock.ErrNotAcquired) || ran != 1 {
		t.Fatalf("a second RunOnce within the hold: %v, ran %d times; want ErrNotAcquired and no run", err, ran)
	}
	if info, err := in.Inspect(ctx, k); err != nil || !info.Held || info.TTL > hold {
		t.Fatalf("within the hold, after the first Locker closed: %+v, %v; want held with at most %v left", info, err, hold)
	}
	Eventually(t, s.h.bound()+hold, "the hold to lapse", func() bool {
		info, err := in.Inspect(ctx, k)
		return err == nil && !info.Held
	})
	if held := time.Since(start); held < hold {
		t.Errorf("the key was free %v after the job began, want at least %v", held, hold)
	}
	// A job longer than the hold releases when it returns.
	err = election.RunOnce(ctx, l3, k, 10*time.Millisecond, func(context.Context) error {
		time.Sleep(20 * time.Millisecond) // the job's work, longer than its hold
		ran++
		return nil
	})
	if err != nil || ran != 2 {
		t.Fatalf("RunOnce after the hold: %v, ran %d times", err, ran)
	}
	if info, err := in.Inspect(ctx, k); err != nil || info.Held {
		t.Errorf("after a job longer than its hold: %+v, %v; want free", info, err)
	}
	jobErr := errors.New("job failed")
	if err := election.RunOnce(ctx, l2, k, 0, func(context.Context) error { return jobErr }); !errors.Is(err, jobErr) {
		t.Errorf("RunOnce of a failing job: %v, want its error", err)
	}
}

func (s *suite) electionBadInput(t *testing.T) {
	ctx := s.context(t)
	l := s.locker(t)
	if _, err := election.New(nil, "k"); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("New(nil): %v, want ErrNilClient", err)
	}
	if _, err := election.New(l, ""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("New with an empty key: %v, want ErrInvalidKey", err)
	}
	e, err := election.New(l, key(t), dlock.WithTTL(s.electionTTL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, strings.Repeat("v", election.MaxValueLen+1)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Campaign with a value over MaxValueLen: %v, want ErrInvalidOption", err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Elected {
		t.Errorf("after the refused campaign: %v, %v; want vacant", l, err)
	}
	if err := election.RunOnce(ctx, l, key(t), -time.Second, func(context.Context) error { return nil }); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("RunOnce with a negative hold: %v, want ErrInvalidOption", err)
	}
	value := strings.Repeat("v", election.MaxValueLen)
	ld, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatalf("Campaign with a value of MaxValueLen: %v", err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != value {
		t.Errorf("Leader: %v, %v; want the long value", l, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ld.Resign(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Resign twice: %v, want ErrNotHeld", err)
	}
	if err := ld.Go(func(context.Context) { t.Error("work ran after Resign") }); !errors.Is(err, election.ErrResigned) {
		t.Errorf("Go after Resign: %v, want ErrResigned", err)
	}
}
