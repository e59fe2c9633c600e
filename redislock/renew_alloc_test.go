package redislock

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
)

// A batch of plain locks on one server is renewed with the command built
// in a buffer the Locker keeps, and the results filed in another: the
// bytes allocated per renewed lock are the reply's, one byte a lock, not
// the command's arguments copied three times over.
func TestRenewPlainAllocatesLittlePerLock(t *testing.T) {
	s := redistest.Start(t)
	l, err := New(s.Client(t), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 1000
	locks := holdMany(t, l, n)
	batch := make([]driver.Renewal[*hold], n)
	for i, lk := range locks {
		batch[i] = driver.Renewal[*hold]{Lock: lk.(*hold), TTL: time.Minute}
	}
	renew := func() {
		for i, err := range l.renew(context.Background(), batch) {
			if err != nil {
				t.Fatalf("renewal of %s: %v", batch[i].Lock.Key(), err)
			}
		}
	}
	renew() // the buffers, the connection
	const rounds = 10
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range rounds {
		renew()
	}
	runtime.ReadMemStats(&m1)
	perLock := float64(m1.TotalAlloc-m0.TotalAlloc) / (rounds * n)
	t.Logf("%.2f bytes, %.1f allocations per batch of %d", perLock, float64(m1.Mallocs-m0.Mallocs)/rounds, n)
	if perLock > 6 {
		t.Errorf("renewing a batch of plain locks allocated %.2f bytes per lock, want under 6", perLock)
	}
}
