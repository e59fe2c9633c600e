package postgreslock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkCycle is an uncontended TryLock and Unlock, each goroutine on
// keys of its own.
func BenchmarkCycle(b *testing.B) {
	l := newLocker(b, pool(b, ""))
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("%s:%d", b.Name(), time.Now().UnixNano())
		for pb.Next() {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandoff has 8 Lockers contend for one key; it reports the
// median time from a release to the next acquisition.
func BenchmarkHandoff(b *testing.B) {
	const n = 8
	p := pool(b, "")
	ctx := context.Background()
	key := b.Name()
	released := make(chan time.Time, 1)
	gaps := make(chan time.Duration, b.N+n)
	done := make(chan struct{})
	left := b.N
	b.ResetTimer()
	for i := 0; i < n; i++ {
		l := newLocker(b, p)
		go func() {
			for {
				lk, err := l.Lock(ctx, key)
				if err != nil {
					return
				}
				select {
				case t := <-released:
					gaps <- time.Since(t)
				default:
				}
				time.Sleep(100 * time.Microsecond)
				select {
				case <-done:
					lk.Unlock(ctx)
					return
				default:
				}
				released <- time.Now()
				lk.Unlock(ctx)
			}
		}()
	}
	var all []time.Duration
	for left > 0 {
		all = append(all, <-gaps)
		left--
	}
	close(done)
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
