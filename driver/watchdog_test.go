package driver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
)

// lease is a handle for the watchdog's tests.
type lease struct {
	Lease
	name string
}

// recorder is a driver stand-in: it records when each lease was renewed,
// lost or lapsed, on the bubble's fake clock, and answers renewals as
// answer says.
type recorder struct {
	t0     time.Time
	answer func(*lease) error
	block  chan struct{} // when not nil, Renew waits on it (a renewal on the wire)

	mu      sync.Mutex
	renewed map[string][]time.Duration
	batches [][]string
	lost    map[string]time.Duration
	causes  map[string]error
	lapsed  map[string]time.Duration
	told    map[string][]error // what Renewed heard, per lease
}

func newRecorder(answer func(*lease) error) *recorder {
	return &recorder{
		t0: time.Now(), answer: answer, renewed: map[string][]time.Duration{},
		lost: map[string]time.Duration{}, causes: map[string]error{}, lapsed: map[string]time.Duration{},
		told: map[string][]error{},
	}
}

func (r *recorder) watchdog(t *testing.T) *Watchdog[*lease] {
	w := new(Watchdog[*lease])
	err := w.Init(WatchdogConfig[*lease]{
		Drift: Drift{Divisor: 100, Floor: 2 * time.Millisecond},
		Renew: func(ctx context.Context, batch []Renewal[*lease]) []error {
			if r.block != nil {
				select {
				case <-r.block:
				case <-ctx.Done():
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			errs := make([]error, len(batch))
			var names []string
			for i, b := range batch {
				names = append(names, b.Lock.name)
				r.renewed[b.Lock.name] = append(r.renewed[b.Lock.name], time.Since(r.t0))
				errs[i] = r.answer(b.Lock)
			}
			r.batches = append(r.batches, names)
			return errs
		},
		Lost: func(lk *lease, cause error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lost[lk.name], r.causes[lk.name] = time.Since(r.t0), cause
		},
		Lapsed: func(lk *lease) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lapsed[lk.name] = time.Since(r.t0)
		},
		Renewed: func(lk *lease, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.told[lk.name] = append(r.told[lk.name], err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

var errUnreachable = errors.New("connection refused")

func TestWatchdogRenewsEveryThird(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		w := r.watchdog(t)
		lk := &lease{name: "a"}
		const ttl = 300 * time.Millisecond
		w.Add(lk, time.Now(), ttl, true)
		time.Sleep(time.Second)
		synctest.Wait()
		got := r.renewed["a"]
		// The first renewal comes a third of the way into the usable lease
		// (295ms after the drift margin), the next ones every ttl/3, or up
		// to ttl/10 early to share a batch.
		if len(got) < 9 || len(got) > 11 {
			t.Fatalf("renewals in 1s of a 300ms lease: %v, want about 10", got)
		}
		if got[0] < 98*time.Millisecond-ttl/coalesce || got[0] > 99*time.Millisecond {
			t.Errorf("first renewal at %v, want about 98ms", got[0])
		}
		for i := 1; i < len(got); i++ {
			if d := got[i] - got[i-1]; d < ttl/3-ttl/coalesce || d > ttl/3 {
				t.Errorf("renewal %d came %v after the one before, want in [%v, %v]", i, d, ttl/3-ttl/coalesce, ttl/3)
			}
		}
		if _, ok := r.lost["a"]; ok {
			t.Errorf("a lease renewed in time was lost at %v", r.lost["a"])
		}
		if d := time.Until(w.Deadline(lk)); d <= 0 || d > ttl {
			t.Errorf("deadline %v from now, want in (0, %v]", d, ttl)
		}
	})
}

func TestWatchdogLosesAtDeadlineWhenUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return errUnreachable })
		w := r.watchdog(t)
		const ttl = 200 * time.Millisecond
		w.Add(&lease{name: "a"}, time.Now(), ttl, true)
		time.Sleep(time.Second)
		synctest.Wait()
		// deadline: 200ms - (2ms + 2ms) = 196ms, on the watchdog's clock
		if got := r.lost["a"]; got != 196*time.Millisecond {
			t.Errorf("lost at %v, want exactly at the deadline, 196ms", got)
		}
		if c := r.causes["a"]; !errors.Is(c, dlock.ErrLeaseExpired) || !errors.Is(c, errUnreachable) {
			t.Errorf("cause %v, want ErrLeaseExpired joined with the renewal's error", c)
		}
		// retried every ttl/20 = 10ms after the first failure at ~65ms
		if n := len(r.renewed["a"]); n < 10 || n > 15 {
			t.Errorf("%d renewal attempts before the deadline, want about 13: %v", n, r.renewed["a"])
		}
	})
}

func TestWatchdogLosesAtOnceWhenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("the server has another token")
		r := newRecorder(func(*lease) error { return errors.Join(dlock.ErrOwnershipLost, refused) })
		w := r.watchdog(t)
		w.Add(&lease{name: "a"}, time.Now(), 300*time.Millisecond, true)
		time.Sleep(time.Second)
		synctest.Wait()
		if len(r.renewed["a"]) != 1 || r.lost["a"] != r.renewed["a"][0] {
			t.Errorf("renewed at %v, lost at %v; want lost by the first renewal", r.renewed["a"], r.lost["a"])
		}
		if c := r.causes["a"]; !errors.Is(c, refused) {
			t.Errorf("cause %v, want the renewal's refusal", c)
		}
	})
}

func TestWatchdogWithoutRenewalAndReleasing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		w := r.watchdog(t)
		pinned, released := &lease{name: "pinned"}, &lease{name: "released"}
		w.Add(pinned, time.Now(), 100*time.Millisecond, false)
		w.Add(released, time.Now(), 100*time.Millisecond, true)
		w.Releasing(released)
		time.Sleep(time.Second)
		synctest.Wait()
		if len(r.renewed) != 0 {
			t.Errorf("renewed %v, want nothing", r.renewed)
		}
		if got := r.lost["pinned"]; got != 97*time.Millisecond {
			t.Errorf("a pinned lease lost at %v, want at its deadline, 97ms", got)
		}
		if got := r.lapsed["released"]; got != 97*time.Millisecond {
			t.Errorf("a releasing lease lapsed at %v, want at its deadline, 97ms", got)
		}
		if _, ok := r.lost["released"]; ok {
			t.Error("a releasing lease was reported lost")
		}
	})
}

func TestWatchdogBatchesAndRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		w := r.watchdog(t)
		const ttl = 300 * time.Millisecond
		a, b, c := &lease{name: "a"}, &lease{name: "b"}, &lease{name: "c"}
		w.Add(a, time.Now(), ttl, true)
		time.Sleep(20 * time.Millisecond) // within ttl/10: joins a's batch
		w.Add(b, time.Now(), ttl, true)
		w.Add(c, time.Now(), ttl, true)
		w.Remove(c)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if len(r.batches) != 1 || len(r.batches[0]) != 2 {
			t.Errorf("batches %v, want one batch of a and b", r.batches)
		}
		if len(r.renewed["c"]) != 0 {
			t.Error("a removed lease was renewed")
		}
	})
}

func TestWatchdogRefreshDuringRenewalOnlyShortens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		r.block = make(chan struct{})
		w := r.watchdog(t)
		lk := &lease{name: "a"}
		const ttl = 3 * time.Second
		w.Add(lk, time.Now(), ttl, true)
		time.Sleep(time.Second) // the renewal is on the wire, blocked
		synctest.Wait()
		if !w.Renewing(lk) {
			t.Fatal("Renewing = false while a renewal is on the wire")
		}
		short := 500 * time.Millisecond
		w.Refreshed(lk, time.Now(), short, true)
		want := w.Deadline(lk)
		close(r.block)
		synctest.Wait()
		if w.Renewing(lk) {
			t.Error("Renewing = true once the renewal's result was filed")
		}
		// The renewal, sent before the Refresh, asked for 3s: it may have
		// been applied first, so the 500ms lease is the one to count on.
		if got := w.Deadline(lk); !got.Equal(want) {
			t.Errorf("deadline moved by %v after a renewal that raced a Refresh, want it kept", got.Sub(want))
		}
		// An unknown outcome never lengthens.
		w.Refreshed(lk, time.Now(), 10*time.Second, false)
		if got := w.Deadline(lk); !got.Equal(want) {
			t.Errorf("a Refresh of unknown outcome moved the deadline by %v", got.Sub(want))
		}
	})
}

// A waiter's grant lasts only its claim window, much shorter than the TTL:
// added with that deadline, its first renewal falls a third of the way into
// what is left of it, and the renewal then sets the full TTL.
func TestWatchdogShortGrantRenewedEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		w := r.watchdog(t)
		lk := &lease{name: "grant"}
		const ttl = 3 * time.Second
		w.AddUntil(lk, time.Now().Add(90*time.Millisecond), ttl, true)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := r.renewed["grant"]
		if len(got) == 0 || got[0] > 30*time.Millisecond || got[0] < 30*time.Millisecond-ttl/coalesce {
			t.Fatalf("renewals at %v, want the first at a third of the 90ms grant, 30ms", got)
		}
		if _, ok := r.lost["grant"]; ok {
			t.Fatalf("a grant renewed in time was lost at %v", r.lost["grant"])
		}
		// renewed for the TTL: the next renewal a third of the TTL later
		if len(got) < 2 || got[1]-got[0] < ttl/3-ttl/coalesce || got[1]-got[0] > ttl/3 {
			t.Errorf("renewals at %v, want the second about %v after the first", got, ttl/3)
		}
		if d := time.Until(w.Deadline(lk)); d < ttl/3 || d > ttl {
			t.Errorf("deadline %v from now, want the full TTL's lease", d)
		}
	})
}

// A renewal that reached the server but does not count (a replica
// shortfall, say) is not a loss: that lease keeps its deadline, is retried
// every ttl/20, and is lost at the deadline with the renewal's error;
// the other leases of its batch are renewed. Once its renewals count
// again, it lives on.
func TestWatchdogPerLeaseErrorIsNotALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		short := errors.New("not acknowledged by enough replicas")
		var mu sync.Mutex
		healAfter := map[string]int{"short": -1, "healed": 2} // failures before success; -1: never
		r := newRecorder(func(lk *lease) error {
			mu.Lock()
			defer mu.Unlock()
			n, ok := healAfter[lk.name]
			if !ok || n == 0 {
				return nil
			}
			if n > 0 {
				healAfter[lk.name] = n - 1
			}
			return short
		})
		w := r.watchdog(t)
		const ttl = 200 * time.Millisecond
		ok, failing, healed := &lease{name: "ok"}, &lease{name: "short"}, &lease{name: "healed"}
		now := time.Now()
		w.Add(ok, now, ttl, true)
		w.Add(failing, now, ttl, true)
		w.Add(healed, now, ttl, true)
		time.Sleep(time.Second)
		synctest.Wait()
		if len(r.batches) == 0 || len(r.batches[0]) != 3 {
			t.Fatalf("batches %v, want the three leases in the first", r.batches)
		}
		// deadline: 200ms - (2ms + 2ms) = 196ms
		if got := r.lost["short"]; got != 196*time.Millisecond {
			t.Errorf("a lease whose renewals never counted lost at %v, want at its deadline, 196ms", got)
		}
		if c := r.causes["short"]; !errors.Is(c, dlock.ErrLeaseExpired) || !errors.Is(c, short) || errors.Is(c, dlock.ErrOwnershipLost) {
			t.Errorf("cause %v, want ErrLeaseExpired with the renewal's error", c)
		}
		// retried every ttl/20 = 10ms after the first attempt at ~65ms
		if n := len(r.renewed["short"]); n < 10 || n > 15 {
			t.Errorf("%d renewal attempts before the deadline, want about 13: %v", n, r.renewed["short"])
		}
		if got := r.renewed["healed"]; len(got) < 3 || got[2]-got[0] > 3*ttl/20 {
			t.Errorf("renewals of the healed lease at %v, want two retries ttl/20 apart", got)
		}
		for _, name := range []string{"ok", "healed"} {
			if at, lost := r.lost[name]; lost {
				t.Errorf("lease %s lost at %v, want renewed", name, at)
			}
			if n := len(r.renewed[name]); n < 9 {
				t.Errorf("lease %s renewed %d times in 1s of a 200ms lease, want every third", name, n)
			}
		}
	})
}

// Renewed hears the outcome of every renewal of a watched lease, in order:
// renewals, failures, and the refusal that loses a lease; not the refusal
// that a release in flight explains.
func TestWatchdogTellsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		refused := map[string]bool{}
		r := newRecorder(func(lk *lease) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case refused[lk.name]:
				return dlock.ErrOwnershipLost
			case lk.name == "flaky" && len(refused) == 0:
				refused["flaky-failed-once"] = true
				return errUnreachable
			}
			return nil
		})
		r.block = make(chan struct{})
		close(r.block)
		w := r.watchdog(t)
		const ttl = 300 * time.Millisecond
		kept, lost, released, flaky := &lease{name: "kept"}, &lease{name: "lost"}, &lease{name: "released"}, &lease{name: "flaky"}
		now := time.Now()
		for _, lk := range []*lease{kept, lost, released, flaky} {
			w.Add(lk, now, ttl, true)
		}
		time.Sleep(ttl / 2) // every lease renewed once
		synctest.Wait()
		mu.Lock()
		refused["lost"], refused["released"] = true, true
		mu.Unlock()
		w.Releasing(released) // its refusal is its own release's doing
		time.Sleep(ttl)
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if got := r.told["kept"]; len(got) < 3 || slices.ContainsFunc(got, func(e error) bool { return e != nil }) {
			t.Errorf("kept: told %v, want renewals only", got)
		}
		if got := r.told["lost"]; len(got) < 2 || got[0] != nil || !errors.Is(got[len(got)-1], dlock.ErrOwnershipLost) {
			t.Errorf("lost: told %v, want a renewal, then the refusal", got)
		}
		for _, e := range r.told["released"] {
			if e != nil {
				t.Errorf("released: told %v, want no refusal after Releasing", r.told["released"])
			}
		}
		if got := r.told["flaky"]; len(got) < 2 || !errors.Is(got[0], errUnreachable) || got[1] != nil {
			t.Errorf("flaky: told %v, want the failure, then a renewal", got)
		}
	})
}

// A Refresh that shortens the lease while a renewal of the old TTL is on
// the wire: the renewal's reply, landing after the Refresh, neither puts
// the longer deadline back nor leaves the lease to expire at the new
// deadline. Renewals go on at the new TTL's cadence, and the lease lives.
func TestWatchdogRenewalLandingAfterShorterRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		r.block = make(chan struct{})
		w := r.watchdog(t)
		lk := &lease{name: "a"}
		const ttl, short = 3 * time.Second, 150 * time.Millisecond
		w.Add(lk, time.Now(), ttl, true)
		time.Sleep(time.Second) // the first renewal is on the wire, blocked
		synctest.Wait()
		if !w.Renewing(lk) {
			t.Fatal("Renewing = false while a renewal is on the wire")
		}
		w.Refreshed(lk, time.Now(), short, true)
		refreshed := time.Since(r.t0)
		time.Sleep(10 * time.Millisecond) // the renewal's reply lands after the Refresh
		close(r.block)
		time.Sleep(20 * short)
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if at, ok := r.lost["a"]; ok {
			t.Fatalf("lost at %v (%v after Refresh(%v)): %v; want renewed at the new TTL", at, at-refreshed, short, r.causes["a"])
		}
		var after []time.Duration
		for _, at := range r.renewed["a"] {
			if at > refreshed {
				after = append(after, at)
			}
		}
		// every short/3 = 50ms, up to short/10 early, for 20 short leases
		if len(after) < 55 || len(after) > 70 {
			t.Errorf("%d renewals in the %v after Refresh(%v), want about 60: %v", len(after), 20*short, short, after)
		}
		for i := 1; i < len(after); i++ {
			if d := after[i] - after[i-1]; d > short/3 {
				t.Fatalf("renewals %v and %v after the Refresh are %v apart, want at most %v", after[i-1], after[i], d, short/3)
			}
		}
		if d := time.Until(w.Deadline(lk)); d <= 0 || d > short {
			t.Errorf("deadline %v from now, want in (0, %v]", d, short)
		}
	})
}
