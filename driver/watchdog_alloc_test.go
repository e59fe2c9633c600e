package driver

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// A renewal period of many leases costs the watchdog no allocation per
// lease: the batch, the driver's view of it and the generations it files
// the replies by are buffers it keeps, so that holding ten thousand locks
// makes no garbage for the collector to chase. What the driver's Renew
// allocates is its own; here it allocates nothing.
func TestWatchdogRenewalAllocatesNothingPerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, ttl = 1000, 3 * time.Second
		var batches, renewed int
		ok := make([]error, n)
		w := new(Watchdog[*lease])
		if err := w.Init(WatchdogConfig[*lease]{
			Drift: Drift{Divisor: 100, Floor: 2 * time.Millisecond},
			Renew: func(_ context.Context, batch []Renewal[*lease]) []error {
				batches++
				renewed += len(batch)
				return ok[:len(batch)]
			},
			Lost:     func(lk *lease, cause error) { t.Errorf("%s lost: %v", lk.name, cause) },
			Lapsed:   func(lk *lease) { t.Errorf("%s lapsed", lk.name) },
			MaxBatch: n,
		}); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		start := time.Now()
		for range n {
			w.Add(&lease{name: "l"}, start, ttl, true)
		}
		// Two periods to warm the buffers up, then three measured.
		time.Sleep(2 * ttl / 3)
		synctest.Wait()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		b0, r0 := batches, renewed
		time.Sleep(3 * ttl / 3)
		synctest.Wait()
		runtime.ReadMemStats(&m1)
		if got := renewed - r0; got < 3*n {
			t.Fatalf("%d renewals in three periods of %d leases, want %d", got, n, 3*n)
		}
		perLease := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(renewed-r0)
		perBatch := float64(m1.Mallocs-m0.Mallocs) / float64(batches-b0)
		t.Logf("%d batches, %.2f bytes per lease, %.1f allocations per batch", batches-b0, perLease, perBatch)
		if perLease > 2 {
			t.Errorf("the watchdog allocated %.2f bytes per renewed lease, want under 2", perLease)
		}
	})
}
