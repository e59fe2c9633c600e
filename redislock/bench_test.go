package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/redis/go-redis/v9"
)

const rawRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

// BenchmarkUncontended is one TryLock+Unlock cycle, beside the floor: the
// two raw go-redis calls of the single-instance algorithm (SET NX PX, then
// an EVALSHA compare-and-delete). rtt/op counts round trips with a hook.
// "bounded" is a client with ContextTimeoutEnabled; "cancel" a context
// that can be cancelled, as a request's is.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("floor", func(b *testing.B) {
		hook := &counter{}
		c := shared.Client(b)
		c.AddHook(hook)
		release := redis.NewScript(rawRelease)
		key := "bench:floor"
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			token := driver.NewToken()
			ok, err := c.SetNX(ctx, key, token, 10*time.Second).Result()
			if err != nil || !ok {
				b.Fatalf("SET NX: %v %v", ok, err)
			}
			if n, err := release.Run(ctx, c, []string{key}, token).Int64(); err != nil || n != 1 {
				b.Fatalf("release: %v %v", n, err)
			}
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "rtt/op")
	})
	cancellable, cancel := context.WithCancel(ctx) // a request's context has a Done channel
	defer cancel()
	for _, bc := range []struct {
		name    string
		opts    []dlock.Option
		bounded bool // the client's ContextTimeoutEnabled
		ctx     context.Context
	}{
		{"dlock", nil, false, ctx},
		{"dlock-bounded", nil, true, ctx},
		{"dlock-cancel", nil, false, cancellable},
		{"dlock-bounded-cancel", nil, true, cancellable},
		{"dlock-lease", []dlock.Option{dlock.WithLease(10 * time.Second)}, false, ctx},
		{"dlock-owner", []dlock.Option{dlock.WithOwner("bench")}, false, ctx},
	} {
		ctx := bc.ctx
		b.Run(bc.name, func(b *testing.B) {
			hook := &counter{}
			o := shared.Options()
			o.ContextTimeoutEnabled = bc.bounded
			c := redis.NewClient(o)
			defer c.Close()
			c.AddHook(hook)
			l, err := New(c, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			key := "bench:" + bc.name
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				lk, err := l.TryLock(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "rtt/op")
		})
	}
}

// reportCPU reports the CPU time this process (the client) spent per
// operation since cpu: on a loaded machine a steadier figure than ns/op.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkHandoff is a hot key: n contenders, each on a Locker of its own
// (its own connections), hold the lock 2ms and ask again at once. It reports
// acquisitions and hand-offs (acquisitions by a contender other than the
// last holder) per second, hand-off latency from the start of the release to
// the return of the next holder's Lock (p50, p99), round trips per
// acquisition, and the fewest and most acquisitions of one contender.
func BenchmarkHandoff(b *testing.B) {
	modes := []struct {
		name string
		opts []dlock.Option
	}{
		{"notify", nil},
		{"fair", []dlock.Option{dlock.WithFair(true)}},
		{"notify1s", []dlock.Option{dlock.WithRetry(dlock.FixedInterval(time.Second))}},
		{"poll10ms", []dlock.Option{dlock.WithNotify(false), dlock.WithRetry(dlock.FixedInterval(10 * time.Millisecond))}},
		{"poll100ms", []dlock.Option{dlock.WithNotify(false), dlock.WithRetry(dlock.FixedInterval(100 * time.Millisecond))}},
	}
	for _, n := range []int{2, 8, 32} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("%s/contenders=%d", m.name, n), func(b *testing.B) {
				benchHandoff(b, n, m.opts)
			})
		}
	}
}

func benchHandoff(b *testing.B, n int, opts []dlock.Option) {
	ctx := context.Background()
	key := "bench:hot:" + b.Name()
	hook := &counter{}
	lockers := make([]*Locker, n)
	for i := range lockers {
		c := shared.Client(b)
		c.AddHook(hook)
		l, err := New(c, opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		lockers[i] = l
	}
	var (
		mu        sync.Mutex
		last      = -1
		releasing time.Time
		latencies []time.Duration
		per       = make([]int, n)
		acquired  atomic.Int64
		wg        sync.WaitGroup
	)
	total := int64(b.N)
	b.ResetTimer()
	start := time.Now()
	trips := hook.trips.Load()
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				per[i]++
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // the work under the lock
				mu.Lock()
				releasing = time.Now()
				mu.Unlock()
				if err := lk.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	b.StopTimer()
	got := acquired.Load()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
	}
	b.ReportMetric(float64(got)/secs, "acq/s")
	b.ReportMetric(float64(len(latencies))/secs, "handoffs/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(hook.trips.Load()-trips)/float64(got), "rtt/acq")
	b.ReportMetric(float64(slices.Min(per)), "min-acq")
	b.ReportMetric(float64(slices.Max(per)), "max-acq")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUncontendedParallel is BenchmarkUncontended from 64 goroutines
// (32 per core), each on a key of its own: the server, not the round trip,
// is the bottleneck.
func BenchmarkUncontendedParallel(b *testing.B) {
	ctx := context.Background()
	var seq atomic.Int64
	b.Run("floor", func(b *testing.B) {
		c := shared.Client(b)
		release := redis.NewScript(rawRelease)
		b.SetParallelism(32)
		b.ReportAllocs()
		cpu := cpuTime()
		defer func() { reportCPU(b, cpu) }()
		b.RunParallel(func(pb *testing.PB) {
			key := fmt.Sprint("bench:pfloor:", seq.Add(1))
			for pb.Next() {
				token := driver.NewToken()
				if ok, err := c.SetNX(ctx, key, token, 10*time.Second).Result(); err != nil || !ok {
					b.Errorf("SET NX: %v %v", ok, err)
					return
				}
				if n, err := release.Run(ctx, c, []string{key}, token).Int64(); err != nil || n != 1 {
					b.Errorf("release: %v %v", n, err)
					return
				}
			}
		})
	})
	for _, bc := range []struct {
		name string
		par  int // goroutines per GOMAXPROCS
	}{{"dlock", 32}, {"dlock-8", 4}} { // 64 and 8 goroutines on 2 cores
		b.Run(bc.name, func(b *testing.B) { benchParallel(b, bc.par, &seq) })
	}
}

// benchParallel is BenchmarkUncontendedParallel's dlock part, from par
// goroutines per GOMAXPROCS.
func benchParallel(b *testing.B, par int, seq *atomic.Int64) {
	ctx := context.Background()
	hook := &counter{}
	c := shared.Client(b)
	c.AddHook(hook)
	l, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetParallelism(par)
	b.ReportAllocs()
	cpu := cpuTime()
	defer func() {
		reportCPU(b, cpu)
		b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "rtt/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("bench:pdlock:", seq.Add(1))
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
}

// BenchmarkClusterParallel is TryLock+Unlock from 64 goroutines of one
// Locker on a 3-master Cluster, each goroutine on keys of its own spread
// over the shards. rtt/op counts the round trips to every node: the
// goroutines share them per master, as on one server (sent alone, each
// cycle would cost 2).
func BenchmarkClusterParallel(b *testing.B) {
	ctx := context.Background()
	c := startCluster(b, 3)
	hook := &counter{}
	l := lockerOf(b, c.countedClient(b, hook))
	var next atomic.Int64
	b.SetParallelism(32) // × GOMAXPROCS 2 on the machine of the README's figures
	b.ReportAllocs()
	hook.trips.Store(0)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench:cluster:%d", next.Add(1))
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
	b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "rtt/op")
}
