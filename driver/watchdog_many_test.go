package driver

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// Many leases that fall due together are attended to at once: renewed in
// few batches every period, each renewed on time, and those not renewed
// lost at their deadline to the tick, while others wait in the heap.
func TestWatchdogManyDueTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(func(*lease) error { return nil })
		w := r.watchdog(t)
		const ttl = 300 * time.Millisecond
		deadline := ttl - (Drift{Divisor: 100, Floor: 2 * time.Millisecond}).Of(ttl)
		var renewing, expiring []*lease
		start := time.Now()
		for i := range 400 {
			lk := &lease{name: fmt.Sprint("r", i)}
			renewing = append(renewing, lk)
			w.Add(lk, start, ttl, true)
			if i%4 == 0 {
				lk := &lease{name: fmt.Sprint("x", i)}
				expiring = append(expiring, lk)
				w.Add(lk, start, ttl, false)
			}
		}
		// some that fall due later, and are neither renewed nor lost
		for i := range 30 {
			w.Add(&lease{name: fmt.Sprint("later", i)}, start, time.Hour, false)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, lk := range renewing {
			got := r.renewed[lk.name]
			if len(got) < 9 || len(got) > 11 {
				t.Fatalf("%s renewed at %v in 1s of a 300ms lease, want about 10 times", lk.name, got)
			}
			last := time.Duration(0)
			for _, at := range got {
				if at-last > deadline {
					t.Fatalf("%s renewed at %v: %v without a renewal, more than its lease of %v", lk.name, got, at-last, deadline)
				}
				last = at
			}
			if _, ok := r.lost[lk.name]; ok {
				t.Fatalf("%s lost at %v: %v", lk.name, r.lost[lk.name], r.causes[lk.name])
			}
		}
		if len(r.batches) > 12 {
			t.Fatalf("%d batches for 10 periods of leases due together", len(r.batches))
		}
		for _, lk := range expiring {
			if at, ok := r.lost[lk.name]; !ok || at != deadline {
				t.Fatalf("%s lost at %v (%v), want at its deadline %v", lk.name, at, ok, deadline)
			}
			if got := r.renewed[lk.name]; len(got) > 0 {
				t.Fatalf("%s, not renewing, renewed at %v", lk.name, got)
			}
		}
		if len(r.lost) != len(expiring) {
			t.Fatalf("%d leases lost, want the %d not renewed", len(r.lost), len(expiring))
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := w.leases.len(); n != len(renewing)+30 {
			t.Fatalf("%d leases watched, want %d", n, len(renewing)+30)
		}
	})
}
