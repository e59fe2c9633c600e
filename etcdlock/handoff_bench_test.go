package etcdlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkHandoff hands one key from waiter to waiter on a cluster of
// three members, beside etcd's concurrency.Mutex: n contenders, each with
// a client of its own, Lock, release at once, and wait until another has
// taken the key before they Lock again, so that every acquisition is a
// hand-off. It reports the median and 90th percentile of the time from a
// release's call to the next holder's return (p50-µs, p90-µs), and the
// CPU time of the process per acquisition, the servers' included
// (cpu-µs/op), which a busy machine disturbs less.
func BenchmarkHandoff(b *testing.B) {
	cl := etcdtest.StartN(b, 3)
	for _, n := range []int{8} {
		b.Run(fmt.Sprintf("dlock/n=%d", n), func(b *testing.B) {
			handoffBench(b, n, func(b *testing.B) func(ctx context.Context, key string) (func(context.Context) error, error) {
				l := newLocker(b, cl.Client(b))
				return func(ctx context.Context, key string) (func(context.Context) error, error) {
					lk, err := l.Lock(ctx, key)
					if err != nil {
						return nil, err
					}
					return lk.Unlock, nil
				}
			})
		})
		b.Run(fmt.Sprintf("mutex/n=%d", n), func(b *testing.B) {
			handoffBench(b, n, func(b *testing.B) func(ctx context.Context, key string) (func(context.Context) error, error) {
				s, err := concurrency.NewSession(cl.Client(b))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return func(ctx context.Context, key string) (func(context.Context) error, error) {
					m := concurrency.NewMutex(s, key)
					if err := m.Lock(ctx); err != nil {
						return nil, err
					}
					return m.Unlock, nil
				}
			})
		})
	}
}

// handoffBench runs b.N acquisitions of one key by n contenders made by
// party (see BenchmarkHandoff).
func handoffBench(b *testing.B, n int, party func(*testing.B) func(ctx context.Context, key string) (func(context.Context) error, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := "handoff:" + b.Name()
	lock := make([]func(ctx context.Context, key string) (func(context.Context) error, error), n)
	for i := range lock {
		lock[i] = party(b)
		unlock, err := lock[i](ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		gen      int64 // acquisitions so far
		released time.Time
		lat      []time.Duration
		left     atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, n)
	)
	left.Store(int64(b.N))
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := range n {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				unlock, err := lock[i](ctx, key)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				mu.Lock()
				if !released.IsZero() {
					lat = append(lat, time.Since(released))
				}
				gen++
				mine := gen
				cond.Broadcast()
				released = time.Now()
				mu.Unlock()
				if err := unlock(ctx); err != nil {
					errs <- err
					cancel()
					return
				}
				// Wait for the next holder, unless we were the last.
				mu.Lock()
				for gen == mine && left.Load() > 0 && ctx.Err() == nil {
					cond.Wait()
				}
				mu.Unlock()
			}
			mu.Lock()
			cond.Broadcast()
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
	}
}
