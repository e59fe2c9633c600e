package dlockotel_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// A Locker's metrics, exported to Prometheus: the series an operator sees
// on the /metrics page (promhttp.HandlerFor(registry, ...) serves it),
// here without Prometheus's own labels.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		panic(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	obs, err := dlockotel.New(dlockotel.WithMeterProvider(provider))
	if err != nil {
		panic(err)
	}

	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb, dlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	for _, key := range []string{"order:41", "order:42"} { // two holds, released
		lk, err := locker.TryLock(ctx, key)
		if err != nil {
			panic(err)
		}
		lk.Unlock(ctx)
	}

	// Another process holds order:43: a wait for it runs out.
	other, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer other.Close()
	if _, err := other.TryLock(ctx, "order:43"); err != nil {
		panic(err)
	}
	_, err = locker.Lock(ctx, "order:43", dlock.WithWait(50*time.Millisecond))
	fmt.Println("busy:", errors.Is(err, dlock.ErrNotAcquired))

	// An operator clears a hold that looked stuck: its holder learns at
	// its next renewal, which the server refuses, that it lost the lock.
	lk, err := locker.TryLock(ctx, "order:44", dlock.WithTTL(time.Second))
	if err != nil {
		panic(err)
	}
	if _, err := other.ForceUnlock(ctx, "order:44"); err != nil {
		panic(err)
	}
	<-lk.Done()

	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "dlock_") {
			continue
		}
		fmt.Println(f.GetName())
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				fmt.Printf("  %s count=%d\n", labels(m.GetLabel()), m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				fmt.Printf("  %s %v\n", labels(m.GetLabel()), m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				fmt.Printf("  %s %v\n", labels(m.GetLabel()), m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// busy: true
	// dlock_acquire_duration_seconds
	//   dlock_backend=redis dlock_lock_name=order:* dlock_outcome=acquired count=3
	//   dlock_backend=redis dlock_lock_name=order:* dlock_outcome=timeout count=1
	// dlock_held
	//   dlock_backend=redis dlock_lock_name=order:* 0
	// dlock_hold_duration_seconds
	//   dlock_backend=redis dlock_lock_name=order:* count=3
	// dlock_lost_total
	//   dlock_backend=redis dlock_lock_name=order:* dlock_reason=ownership_lost 1
	// dlock_renewal_failures_total
	//   dlock_backend=redis dlock_lock_name=order:* 1
	// dlock_waiting
	//   dlock_backend=redis dlock_lock_name=order:* 0
}

// labels writes the dlock labels of a series.
func labels(pairs []*dto.LabelPair) string {
	var out []string
	for _, p := range pairs {
		if strings.HasPrefix(p.GetName(), "dlock_") {
			out = append(out, p.GetName()+"="+p.GetValue())
		}
	}
	return strings.Join(out, " ")
}
