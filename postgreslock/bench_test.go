package postgreslock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// BenchmarkHandoff has 8 or 32 Lockers contend for one key, each
// holding it 100µs at a time; it reports the median and 99th percentile
// of the time from a release to the next acquisition, and the statements
// sent per acquisition (all of them: attempts, registrations, releases).
func BenchmarkHandoff(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) { handoff(b, n) })
	}
}

// counter is a pgx tracer that counts the statements sent (n) and
// those answered or failed (done).
type counter struct{ n, done atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { c.done.Add(1) }

func handoff(b *testing.B, n int) {
	cfg, err := pgxpool.ParseConfig(shared.URL(""))
	if err != nil {
		b.Fatal(err)
	}
	var sent counter
	cfg.ConnConfig.Tracer = &sent
	cfg.MaxConns = int32(n + 4)
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	key := b.Name()
	released := make(chan time.Time, 1)
	gaps := make(chan time.Duration, b.N+n)
	done := make(chan struct{})
	var acquired atomic.Int64
	lockers := make([]*postgreslock.Locker, n)
	for i := range lockers {
		lockers[i] = newLocker(b, p)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	start := sent.n.Load()
	b.ResetTimer()
	for _, l := range lockers {
		wg.Go(func() {
			for {
				lk, err := l.Lock(ctx, key)
				if err != nil {
					return
				}
				acquired.Add(1)
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
		})
	}
	all := make([]time.Duration, 0, b.N)
	for len(all) < b.N {
		all = append(all, <-gaps)
	}
	b.StopTimer()
	stmts, acqs := sent.n.Load()-start, acquired.Load()
	close(done)
	for _, l := range lockers {
		l.Close()
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(stmts)/float64(acqs), "stmts/acq")
}
