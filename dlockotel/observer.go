package dlockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the meter and the tracer.
const scope = "github.com/dlock-go/dlock/dlockotel"

// The attributes of the metrics and spans.
const (
	attrBackend  = "dlock.backend"
	attrName     = "dlock.lock.name"
	attrOutcome  = "dlock.outcome"
	attrReason   = "dlock.reason"
	attrAttempts = "dlock.attempts"
	attrHandoff  = "dlock.handoff"
	attrBlocked  = "dlock.blocked"
	attrFence    = "dlock.fence"
)

// Observer is a observe.Observer that records a Locker's events as
// OpenTelemetry metrics and spans (see the package doc). Create it with
// New; one Observer may serve any number of Lockers. It is safe for
// concurrent use.
type Observer struct {
	name   func(string) string
	tracer trace.Tracer

	acquire, hold    metric.Float64Histogram
	held, waiting    metric.Int64UpDownCounter
	lost, renewFails metric.Int64Counter

	holds sync.Map // dlock.Lock -> trace.Span: the hold spans still open
}

var _ observe.Observer = (*Observer)(nil)

type config struct {
	mp   metric.MeterProvider
	tp   trace.TracerProvider
	name func(string) string
}

// An Option configures an Observer.
type Option func(*config)

// WithMeterProvider records the metrics with mp instead of the global
// MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider records the spans with tp instead of the global
// TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockName names each lock in the metrics and spans by name(key)
// instead of [LockName](key). The names should be few: each is a series
// of every metric.
func WithLockName(name func(key string) string) Option {
	return func(c *config) { c.name = name }
}

// Bucket boundaries, in seconds: acquisitions take from a round trip to a
// long wait; holds from milliseconds to hours.
var (
	acquireBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

// New returns an Observer that records with the global MeterProvider and
// TracerProvider, unless options say otherwise. It fails when a provider
// or the lock-name function given is nil, or an instrument cannot be
// made.
func New(opts ...Option) (*Observer, error) {
	c := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider(), name: LockName}
	for _, opt := range opts {
		opt(&c)
	}
	switch {
	case c.mp == nil:
		return nil, errors.New("dlockotel: nil MeterProvider")
	case c.tp == nil:
		return nil, errors.New("dlockotel: nil TracerProvider")
	case c.name == nil:
		return nil, errors.New("dlockotel: nil lock-name function")
	}
	m := c.mp.Meter(scope)
	o := &Observer{name: c.name, tracer: c.tp.Tracer(scope)}
	var errs [6]error
	o.acquire, errs[0] = m.Float64Histogram("dlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long TryLock and Lock calls took, by outcome."),
		metric.WithExplicitBucketBoundaries(acquireBuckets...))
	o.hold, errs[1] = m.Float64Histogram("dlock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted, from acquisition to release or loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	o.held, errs[2] = m.Int64UpDownCounter("dlock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held now."))
	o.waiting, errs[3] = m.Int64UpDownCounter("dlock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls waiting now for a busy lock."))
	o.lost, errs[4] = m.Int64Counter("dlock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Holds lost other than by their release, by reason."))
	o.renewFails, errs[5] = m.Int64Counter("dlock.renewal.failures", metric.WithUnit("{renewal}"),
		metric.WithDescription("Renewals of held locks that failed."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return o, nil
}

// Observe records e.
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	lock := []attribute.KeyValue{attribute.String(attrBackend, e.Backend), attribute.String(attrName, o.name(e.Key))}
	switch e.Kind {
	case observe.Acquire:
		o.acquired(ctx, e, lock)
	case observe.Wait:
		o.waiting.Add(ctx, 1, metric.WithAttributes(lock...))
	case observe.Renew:
		if e.Err == nil {
			return
		}
		o.renewFails.Add(ctx, 1, metric.WithAttributes(lock...))
		if span, ok := o.holds.Load(e.Lock); ok {
			span.(trace.Span).AddEvent("dlock.renewal.failed", trace.WithAttributes(attribute.String("error.message", e.Err.Error())))
		}
	case observe.Release, observe.Lost:
		o.ended(ctx, e, lock)
	}
}

// acquired records the end of an acquisition: its duration, its span and,
// when it acquired, the start of the hold.
func (o *Observer) acquired(ctx context.Context, e observe.Event, lock []attribute.KeyValue) {
	now := time.Now()
	attrs := metric.WithAttributes(append(lock, attribute.String(attrOutcome, e.Outcome.String()))...)
	o.acquire.Record(ctx, e.Waited.Seconds(), attrs)
	if e.Blocked {
		o.waiting.Add(ctx, -1, metric.WithAttributes(lock...))
	}
	_, span := o.tracer.Start(ctx, "dlock.acquire", trace.WithTimestamp(now.Add(-e.Waited)),
		trace.WithAttributes(lock...), trace.WithAttributes(
			attribute.String(attrOutcome, e.Outcome.String()),
			attribute.Int(attrAttempts, e.Attempts),
			attribute.Bool(attrHandoff, e.Handoff),
			attribute.Bool(attrBlocked, e.Blocked)))
	if e.Outcome == observe.Failed {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	if e.Outcome == observe.Acquired {
		span.SetAttributes(attribute.Int64(attrFence, int64(e.Fence)))
	}
	span.End(trace.WithTimestamp(now))
	if e.Outcome != observe.Acquired || e.Lock == nil {
		return
	}
	o.held.Add(ctx, 1, metric.WithAttributes(lock...))
	_, hold := o.tracer.Start(ctx, "dlock.hold", trace.WithTimestamp(now), trace.WithAttributes(lock...),
		trace.WithAttributes(attribute.Int64(attrFence, int64(e.Fence))))
	o.holds.Store(e.Lock, hold)
}

// ended records the end of a hold.
func (o *Observer) ended(ctx context.Context, e observe.Event, lock []attribute.KeyValue) {
	s, ok := o.holds.LoadAndDelete(e.Lock)
	if !ok {
		return // a hold whose acquisition this Observer did not see
	}
	span := s.(trace.Span)
	o.held.Add(ctx, -1, metric.WithAttributes(lock...))
	o.hold.Record(ctx, e.Held.Seconds(), metric.WithAttributes(lock...))
	if e.Kind == observe.Lost {
		reason := Reason(e.Err)
		o.lost.Add(ctx, 1, metric.WithAttributes(append(lock, attribute.String(attrReason, reason))...))
		span.SetAttributes(attribute.String(attrReason, reason))
		span.SetStatus(codes.Error, "lock lost: "+e.Err.Error())
	}
	span.End()
}

// Reason names why a hold was lost, from the Err of its Lost event:
// "ownership_lost" (the store no longer had it: it expired there, was
// deleted or taken), "lease_expired" (its lease ran out before a renewal
// reached the store) or "other".
func Reason(err error) string {
	switch {
	case errors.Is(err, dlock.ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(err, dlock.ErrOwnershipLost):
		return "ownership_lost"
	}
	return "other"
}
