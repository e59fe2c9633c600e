package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// sdk is an Observer on in-memory SDK providers: a manual metric reader
// and a span recorder.
type sdk struct {
	obs    *dlockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newSDK(t *testing.T, opts ...dlockotel.Option) *sdk {
	t.Helper()
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		s.tp.Shutdown(context.Background())
	})
	obs, err := dlockotel.New(append([]dlockotel.Option{dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(s.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.obs = obs
	return s
}

// value is the count of a histogram's data point, or the value of a
// sum's, whose attributes include want; false when there is none.
func (s *sdk) value(t *testing.T, name string, want ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	has := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						return int64(p.Count), true
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						return p.Value, true
					}
				}
			default:
				t.Fatalf("%s: data of type %T", name, m.Data)
			}
		}
	}
	return 0, false
}

// want fails t unless the metric's value (see value) is n.
func (s *sdk) want(t *testing.T, name string, n int64, attrs ...attribute.KeyValue) {
	t.Helper()
	if got, ok := s.value(t, name, attrs...); !ok || got != n {
		t.Errorf("%s%v = %d (found: %v), want %d", name, attrs, got, ok, n)
	}
}

// eventually waits up to d for the metric's value to be n.
func (s *sdk) eventually(t *testing.T, d time.Duration, name string, n int64, attrs ...attribute.KeyValue) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if got, ok := s.value(t, name, attrs...); ok && got == n {
			return
		}
		if time.Now().After(deadline) {
			s.want(t, name, n, attrs...)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the reader for a condition, bounded above
	}
}

var (
	orders  = attribute.String("dlock.lock.name", "order:*")
	onRedis = attribute.String("dlock.backend", "redis")
)

func outcome(o string) attribute.KeyValue { return attribute.String("dlock.outcome", o) }

func newLocker(t *testing.T, client redis.UniversalClient, opts ...dlock.Option) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(client, append([]dlock.Option{dlock.WithPrefix("otel-" + t.Name())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// The metrics and spans of acquisitions (acquired, busy, after a wait),
// holds released and lost, on a real Redis.
func TestObserver(t *testing.T) {
	s := newSDK(t)
	l := newLocker(t, shared.Client(t), dlock.WithObserver(s.obs))
	other := newLocker(t, shared.Client(t))
	ctx, request := s.tp.Tracer("test").Start(context.Background(), "request")

	held, err := l.TryLock(ctx, "order:42")
	if err != nil {
		t.Fatal(err)
	}
	s.want(t, "dlock.held", 1, onRedis, orders)
	busy, err := other.TryLock(ctx, "order:43")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "order:43"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a busy key: %v", err)
	}

	// A waiter counts in dlock.waiting until the release hands it the lock.
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, "order:43", dlock.WithWait(10*time.Second))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	s.eventually(t, 5*time.Second, "dlock.waiting", 1, orders)
	if err := busy.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	s.want(t, "dlock.waiting", 0, orders)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Lost: the key is deleted under the hold.
	lost, err := l.TryLock(ctx, "order:44", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	shared.Client(t).Del(ctx, "otel-"+t.Name()+":lock:order:44")
	select {
	case <-lost.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lost hold's Done did not close")
	}
	request.End()

	s.want(t, "dlock.acquire.duration", 3, onRedis, orders, outcome("acquired"))
	s.want(t, "dlock.acquire.duration", 1, orders, outcome("busy"))
	s.want(t, "dlock.hold.duration", 3, orders)
	s.want(t, "dlock.held", 0, orders)
	s.want(t, "dlock.lost", 1, orders, attribute.String("dlock.reason", "ownership_lost"))

	var acquires, holds []sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		switch sp.Name() {
		case "dlock.acquire":
			acquires = append(acquires, sp)
		case "dlock.hold":
			holds = append(holds, sp)
		}
		if sp.Name() != "request" && sp.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("span %s is not a child of the caller's span", sp.Name())
		}
		if sp.Name() != "request" && sp.SpanContext().TraceID() != request.SpanContext().TraceID() {
			t.Errorf("span %s is not in the caller's trace", sp.Name())
		}
	}
	if len(acquires) != 4 || len(holds) != 3 {
		t.Fatalf("%d acquire spans and %d hold spans, want 4 and 3", len(acquires), len(holds))
	}
	for _, sp := range acquires {
		if !sp.StartTime().Before(sp.EndTime()) {
			t.Errorf("an acquire span from %v to %v", sp.StartTime(), sp.EndTime())
		}
	}
	if last := holds[len(holds)-1]; last.Status().Code != codes.Error || !hasAttr(last.Attributes(), attribute.String("dlock.reason", "ownership_lost")) {
		t.Errorf("the lost hold's span: status %v, attributes %v; want an error, and the reason", last.Status(), last.Attributes())
	}
	if first := holds[0]; first.Status().Code == codes.Error || first.EndTime().Sub(first.StartTime()) <= 0 {
		t.Errorf("a released hold's span: status %v, from %v to %v", first.Status(), first.StartTime(), first.EndTime())
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv == want {
			return true
		}
	}
	return false
}

// Renewals that fail count in dlock.renewal.failures and mark the hold's
// span, and the loss at the lease deadline counts as lease_expired; names
// come from WithLockName.
func TestObserverRenewalFailures(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	o.ReadTimeout = 30 * time.Millisecond // each renewal fails before the deadline
	client := redis.NewClient(o)
	t.Cleanup(func() { client.Close() })
	s := newSDK(t, dlockotel.WithLockName(func(string) string { return "jobs" }))
	l := newLocker(t, client, dlock.WithObserver(s.obs))
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "job:7", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	select {
	case <-lk.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the hold's Done did not close with the server paused")
	}
	jobs := attribute.String("dlock.lock.name", "jobs")
	if n, ok := s.value(t, "dlock.renewal.failures", jobs); !ok || n < 1 {
		t.Errorf("dlock.renewal.failures = %d, want at least 1", n)
	}
	s.want(t, "dlock.lost", 1, jobs, attribute.String("dlock.reason", "lease_expired"))
	var marked bool
	for _, sp := range s.spans.Ended() {
		for _, ev := range sp.Events() {
			marked = marked || sp.Name() == "dlock.hold" && ev.Name == "dlock.renewal.failed"
		}
	}
	if !marked {
		t.Error("no dlock.renewal.failed event on the hold's span")
	}
}

func TestNewRefusesNil(t *testing.T) {
	for _, opt := range []dlockotel.Option{
		dlockotel.WithMeterProvider(nil),
		dlockotel.WithTracerProvider(nil),
		dlockotel.WithLockName(nil),
	} {
		if _, err := dlockotel.New(opt); err == nil {
			t.Error("New with a nil option: no error")
		}
	}
}

// Reason names the causes a Lost event carries.
func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dlock.ErrOwnershipLost, "ownership_lost"},
		{errors.Join(dlock.ErrLeaseExpired, context.DeadlineExceeded), "lease_expired"},
		{errors.New("elsewhere"), "other"},
	} {
		if got := dlockotel.Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
