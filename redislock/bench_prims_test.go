package redislock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// BenchmarkPrimitives is one acquire+release cycle of each primitive
// beside the lock, uncontended, and a hand-off between contenders (each
// of 8 goroutines on its own Locker takes the key, exclusively, and gives
// it back). rtt/op counts round trips with a hook.
func BenchmarkPrimitives(b *testing.B) {
	ctx := context.Background()
	kinds := []struct {
		name    string
		acquire func(l *Locker, ctx context.Context, key string) (dlock.Lock, error)
	}{
		{"lock", func(l *Locker, ctx context.Context, key string) (dlock.Lock, error) { return l.Lock(ctx, key) }},
		{"semaphore-1", func(l *Locker, ctx context.Context, key string) (dlock.Lock, error) { return l.Acquire(ctx, key, 1) }},
		{"rwlock-write", func(l *Locker, ctx context.Context, key string) (dlock.Lock, error) { return l.WLock(ctx, key) }},
		{"rwlock-read", func(l *Locker, ctx context.Context, key string) (dlock.Lock, error) { return l.RLock(ctx, key) }},
		{"lockall-2", func(l *Locker, ctx context.Context, key string) (dlock.Lock, error) {
			return dlock.LockAll(ctx, l, []string{key + ":a", key + ":b"})
		}},
	}
	for _, k := range kinds {
		b.Run("uncontended/"+k.name, func(b *testing.B) {
			hook := &counter{}
			c := shared.Client(b)
			c.AddHook(hook)
			l, err := New(c)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			key := "bench:prims:" + k.name
			b.ReportAllocs()
			for b.Loop() {
				lk, err := k.acquire(l, ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "rtt/op")
		})
	}
	for _, k := range kinds {
		if k.name == "rwlock-read" {
			continue // readers share: no hand-off
		}
		b.Run("handoff/"+k.name, func(b *testing.B) {
			const contenders = 8
			key := "bench:prims:handoff:" + k.name
			lockers := make([]*Locker, contenders)
			for i := range lockers {
				l, err := New(shared.Client(b))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				lockers[i] = l
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var inside atomic.Int32
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, l := range lockers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						lk, err := k.acquire(l, ctx, key)
						if err != nil {
							b.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							b.Error("two holders at once")
						}
						inside.Add(-1)
						lk.Unlock(ctx)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		})
	}
}
