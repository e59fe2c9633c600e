package etcdlock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkVsMutex measures uncontended TryLock and Unlock cycles of a
// Locker beside etcd's own concurrency.Mutex, on the shared one-member
// cluster and on a three-member cluster of its own (members=3, started for
// the benchmark): g goroutines share one client, each on a key of its own,
// as the bench's etcd part does. The Locker's session and the Mutex's are
// started before the count.
func BenchmarkVsMutex(b *testing.B) {
	for _, members := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			cli := func(b *testing.B) *clientv3.Client { return client(b) }
			if members > 1 {
				cl := etcdtest.StartN(b, members)
				cli = func(b *testing.B) *clientv3.Client { return cl.Client(b) }
			}
			vsMutex(b, cli)
		})
	}
}

// vsMutex runs the cycles of BenchmarkVsMutex on the clients of cli.
func vsMutex(b *testing.B, cli func(*testing.B) *clientv3.Client) {
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("dlock/g=%d", g), func(b *testing.B) {
			l := newLocker(b, cli(b))
			ctx := context.Background()
			parallel(b, g, func(key string) error {
				lk, err := l.TryLock(ctx, key)
				if err != nil {
					return err
				}
				return lk.Unlock(ctx)
			})
		})
		b.Run(fmt.Sprintf("mutex/g=%d", g), func(b *testing.B) {
			s, err := concurrency.NewSession(cli(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			parallel(b, g, func(key string) error {
				m := concurrency.NewMutex(s, key)
				if err := m.TryLock(ctx); err != nil {
					return err
				}
				return m.Unlock(ctx)
			})
		})
	}
}

// parallel runs b.N cycles on g goroutines, each on a key of its own,
// after one cycle of each outside the count. It reports the CPU time of
// the process per cycle (cpu-µs/op), the embedded server's included: on a
// shared machine it varies less than the time per cycle.
func parallel(b *testing.B, g int, cycle func(key string) error) {
	b.Helper()
	keys := make([]string, g)
	for i := range keys {
		keys[i] = "vsmutex:" + strconv.Itoa(g) + ":" + strconv.Itoa(i)
		if err := cycle(keys[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	var (
		left = int64(b.N)
		n    atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, g)
	)
	n.Store(left)
	for _, key := range keys {
		wg.Go(func() {
			for n.Add(-1) >= 0 {
				if err := cycle(key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// cpuTime returns the CPU time of the process so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
