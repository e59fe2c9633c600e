package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// report reports the round trips and script calls counted, per op.
func (h *nodeHook) report(b *testing.B, ops int64, unit string) {
	b.ReportMetric(float64(h.trips.Load())/float64(ops), "rtt/"+unit)
	b.ReportMetric(float64(h.dials.Load())/float64(ops), "dials/"+unit)
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, n := range h.scripts {
		b.ReportMetric(float64(n)/float64(ops), name+"/"+unit)
	}
}

// benchLocker returns a Locker over the shared servers whose clients
// count with c.
func benchLocker(b *testing.B, c *nodeHook, opts ...dlock.Option) *Locker {
	b.Helper()
	cs := clients(b, shared)
	for _, cl := range cs {
		cl.AddHook(c)
	}
	l, err := New(cs, append([]dlock.Option{WithNodeTimeout(testTimeout)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkUncontended is one TryLock+Unlock cycle on the five shared
// servers, from 1 and from 64 goroutines (each on a key of its own, one
// Locker for all). rtt/op counts round trips to all nodes: 10 when every
// request goes out alone, fewer when a node's coalescer pipelines them.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			c := &nodeHook{}
			l := benchLocker(b, c)
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism((g + 1) / 2) // GOMAXPROCS is 2 on the bench machine
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:uncontended:%d", next.Add(1))
				for pb.Next() {
					lk, err := l.TryLock(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := lk.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			c.report(b, int64(b.N), "op")
		})
	}
}

// BenchmarkHandoff is a hot key: n contenders, each on a Locker of its
// own, hold the lock 1ms and ask again at once. It reports hand-off
// latency from the start of the release to the return of the next
// holder's Lock (p50, p99), and round trips and script calls per
// acquisition.
func BenchmarkHandoff(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) {
			ctx := context.Background()
			key := "bench:hot:" + b.Name()
			c := &nodeHook{}
			lockers := make([]*Locker, n)
			for i := range lockers {
				lockers[i] = benchLocker(b, c)
			}
			var (
				mu        sync.Mutex
				last      = -1
				releasing time.Time
				latencies []time.Duration
				acquired  atomic.Int64
				wg        sync.WaitGroup
			)
			total := int64(b.N)
			b.ResetTimer()
			for i, l := range lockers {
				wg.Go(func() {
					for acquired.Load() < total {
						lk, err := l.Lock(ctx, key, dlock.WithWait(30*time.Second))
						if err != nil {
							b.Error(err)
							return
						}
						now := time.Now()
						acquired.Add(1)
						mu.Lock()
						if last != i && last >= 0 {
							latencies = append(latencies, now.Sub(releasing))
						}
						last = i
						mu.Unlock()
						time.Sleep(time.Millisecond) // the work under the lock
						mu.Lock()
						releasing = time.Now()
						mu.Unlock()
						if err := lk.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(latencies)
			if len(latencies) > 0 {
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
			}
			c.report(b, acquired.Load(), "acq")
			b.ReportMetric(0, "ns/op")
		})
	}
}
