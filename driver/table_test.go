package driver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/syncbuf"
)

// fake is a driver's handle without a backend.
type fake struct {
	Hold
	fence uint64
}

func (f *fake) Token() string                                { return "token" }
func (f *fake) Fence() uint64                                { return f.fence }
func (f *fake) Unlock(context.Context) error                 { return nil }
func (f *fake) Refresh(context.Context, time.Duration) error { return nil }
func (f *fake) TTL(context.Context) (time.Duration, error)   { return 0, nil }
func newFake(key, owner string, byOption bool) *fake {
	f := &fake{}
	f.Init(HoldLock, key, owner, byOption)
	return f
}
func newTable(onEnd func(*fake)) *Table[*fake] {
	return newObservedTable(dlock.Options{}, onEnd)
}
func newObservedTable(o dlock.Options, onEnd func(*fake)) *Table[*fake] {
	t := &Table[*fake]{}
	o.Logger = slog.New(slog.DiscardHandler)
	t.Init("mem", o, onEnd)
	return t
}
func mustAdd(t *testing.T, tb *Table[*fake], f *fake, reserve bool) {
	t.Helper()
	if reserve {
		if err := tb.Reserve(f, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Add(f); err != nil {
		t.Fatal(err)
	}
}

// A Locker holds a key at most once without owner: a second reservation,
// pending or held, fails and changes nothing; an owner's holds do not
// count.
func TestReserve(t *testing.T) {
	tb := newTable(nil)
	a := newFake("k", "", false)
	if err := tb.Reserve(a, false); err != nil {
		t.Fatal(err)
	}
	b := newFake("k", "", false)
	if err := tb.Reserve(b, false); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("second reservation while pending: %v, want ErrAlreadyHeld", err)
	}
	mustAdd(t, tb, a, false)
	if err := tb.Reserve(b, false); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("second reservation while held: %v, want ErrAlreadyHeld", err)
	}
	if got, err := tb.Find(context.Background(), "k"); err != nil || got != a {
		t.Fatalf("Find after the refused reservation = %p, %v; want the first hold %p", got, err, a)
	}
	if err := tb.Reserve(newFake("k", "o", false), false); err != nil {
		t.Fatalf("an owner's reservation beside a plain hold: %v", err)
	}
	tb.Remove(a)
	if err := tb.Reserve(b, false); err != nil {
		t.Fatalf("reservation after Remove: %v", err)
	}
}

// Find returns what Locker.Unlock releases.
func TestFind(t *testing.T) {
	ctx := context.Background()
	tb := newTable(nil)
	pending := newFake("p", "", false)
	if err := tb.Reserve(pending, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Find(ctx, "p"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Find of a pending hold: %v, want ErrNotHeld", err)
	}

	byCtx1, byCtx2 := newFake("k", "req", false), newFake("k", "req", false)
	mustAdd(t, tb, byCtx1, true)
	mustAdd(t, tb, byCtx2, true)
	reqCtx := dlock.ContextWithOwner(ctx, "req")
	if got, err := tb.Find(reqCtx, "k"); err != nil || got != byCtx2 {
		t.Fatalf("Find for the owner in ctx = %p, %v; want its newest hold %p", got, err, byCtx2)
	}
	if _, err := tb.Find(ctx, "k"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Find without owner of holds whose owner came in a context: %v, want ErrNotHeld", err)
	}
	if _, err := tb.Find(dlock.ContextWithOwner(ctx, "other"), "k"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Find for another owner: %v, want ErrNotHeld", err)
	}

	opt1, opt2 := newFake("j", "job", true), newFake("j", "job", true)
	mustAdd(t, tb, opt1, true)
	mustAdd(t, tb, opt2, true)
	if got, err := tb.Find(ctx, "j"); err != nil || got != opt2 {
		t.Fatalf("Find without owner of holds made WithOwner = %p, %v; want the newest %p", got, err, opt2)
	}
	tb.Remove(opt2)
	if got, err := tb.Find(ctx, "j"); err != nil || got != opt1 {
		t.Fatalf("Find after the newest left = %p, %v; want %p", got, err, opt1)
	}

	plain := newFake("j", "", false)
	mustAdd(t, tb, plain, true)
	if got, err := tb.Find(ctx, "j"); err != nil || got != plain {
		t.Fatalf("Find without owner = %p, %v; want the hold without owner first", got, err)
	}
	if _, ok := tb.Close(); !ok {
		t.Fatal("Close of an open table")
	}
	if _, err := tb.Find(ctx, "j"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Find after Close: %v, want ErrClosed", err)
	}
}

// Close is decided under the table's mutex: an acquisition is either
// collected by Close or refused by Add, which takes it out of the table.
func TestCloseAndAdd(t *testing.T) {
	tb := newTable(nil)
	held, owned, late := newFake("a", "", false), newFake("b", "o", false), newFake("c", "", false)
	mustAdd(t, tb, held, true)
	mustAdd(t, tb, owned, true)
	if err := tb.Reserve(late, false); err != nil {
		t.Fatal(err)
	}
	all, ok := tb.Close()
	if !ok || len(all) != 2 {
		t.Fatalf("Close = %v, %v; want the 2 held, not the pending one", all, ok)
	}
	if err := tb.Add(late); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
	if late.State() != Pending || len(tb.held["c"].owned) != 0 || tb.held["c"].plain != nil {
		t.Fatalf("a refused Add left state %v, table entry %+v", late.State(), tb.held["c"])
	}
	if err := tb.Reserve(newFake("d", "", false), false); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Reserve after Close: %v, want ErrClosed", err)
	}
	if err := tb.Reserve(newFake("d", "o", false), false); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("an owner's Reserve after Close: %v, want ErrClosed", err)
	}
	if _, ok := tb.Close(); ok {
		t.Fatal("a second Close reported the first")
	}
}

// A hold leaves the table, and onEnd runs, before Done closes: whoever sees
// Done closed may take the key again at once. The log line comes before
// Done too.
func TestEndOrder(t *testing.T) {
	var out syncbuf.Buffer
	var f *fake
	var tb *Table[*fake]
	var inTable, doneClosed bool
	tb = newTable(func(h *fake) {
		_, inTable = tb.held[h.Key()]
		select {
		case <-h.Done():
			doneClosed = true
		default:
		}
	})
	tb.log = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f = newFake("k", "", false)
	mustAdd(t, tb, f, true)
	done := f.Done()
	if !tb.End(f, dlock.ErrNotHeld) {
		t.Fatal("End of a held hold reported false")
	}
	if inTable || doneClosed {
		t.Fatalf("when onEnd ran: in the table %v, Done closed %v; want neither", inTable, doneClosed)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done open after End")
	}
	if f.State() != Released || !errors.Is(f.Err(), dlock.ErrNotHeld) {
		t.Fatalf("after a release: state %v, Err %v", f.State(), f.Err())
	}
	if err := tb.Reserve(newFake("k", "", false), false); err != nil {
		t.Fatalf("Reserve right after Done: %v", err)
	}
	if !strings.Contains(out.String(), "released") {
		t.Fatalf("no release logged: %q", out.String())
	}
	if err := f.Check("unlock"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Check after release: %v", err)
	}
}

// Two ends race: one ends the hold, and the other returns only once the
// hold has ended, so that both callers see its Err.
func TestEndOnce(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{}, 2)
	tb := newTable(func(*fake) {
		entered <- struct{}{}
		<-gate
	})
	f := newFake("k", "", false)
	mustAdd(t, tb, f, true)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	var second bool
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = tb.Lose(f, dlock.ErrOwnershipLost) }()
	<-entered // the first end is inside, past the point of no return
	go func() { defer wg.Done(); second = tb.End(f, dlock.ErrNotHeld); errs[1] = f.Err() }()
	close(gate)
	wg.Wait()
	if second || f.State() != Lost {
		t.Fatalf("the second end won (%v) or the state is %v; want the first, lost", second, f.State())
	}
	for i, err := range errs {
		if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrOwnershipLost) {
			t.Errorf("caller %d saw Err %v, want the loss", i, err)
		}
	}
	if len(entered) != 0 {
		t.Fatal("onEnd ran twice")
	}
}

// Close's caller waits for the waiting acquisitions to leave.
func TestWaitForWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTable(nil)
		w := newFake("k", "o", false)
		if err := tb.Reserve(w, true); err != nil {
			t.Fatal(err)
		}
		tb.Close()
		returned := false
		go func() { tb.Wait(); returned = true }()
		synctest.Wait()
		if returned {
			t.Fatal("Wait returned while a waiter was still in")
		}
		tb.Leave()
		synctest.Wait()
		if !returned {
			t.Fatal("Wait did not return after the waiter left")
		}
	})
}
