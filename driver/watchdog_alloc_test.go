package driver

import (
	"context"
	"runtime"
	"sync/atomic"
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
		const n, ttl = 5000, 3 * time.Second
		var batches, renewed atomic.Int64
		ok := make([]error, n)
		w := new(Watchdog[*lease])
		if err := w.Init(WatchdogConfig[*lease]{
			Drift: Drift{Divisor: 100, Floor: 2 * time.Millisecond},
			Renew: func(_ context.Context, batch []Renewal[*lease]) []error {
				batches.Add(1)
				renewed.Add(int64(len(batch)))
				return ok[:len(batch)]
			},
			Lost:   func(lk *lease, cause error) { t.Errorf("%s lost: %v", lk.name, cause) },
			Lapsed: func(lk *lease) { t.Errorf("%s lapsed", lk.name) },
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
		b0, r0 := batches.Load(), renewed.Load()
		time.Sleep(3 * ttl / 3)
		synctest.Wait()
		runtime.ReadMemStats(&m1)
		b, r := batches.Load()-b0, renewed.Load()-r0
		if r < 3*n {
			t.Fatalf("%d renewals in three periods of %d leases, want %d", r, n, 3*n)
		}
		perLease := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(r)
		perBatch := float64(m1.Mallocs-m0.Mallocs) / float64(b)
		t.Logf("%d batches, %.2f bytes per lease, %.1f allocations per batch", b, perLease, perBatch)
		if perLease > 4 {
			t.Errorf("the watchdog allocated %.2f bytes per renewed lease, want under 4", perLease)
		}
	})
}
