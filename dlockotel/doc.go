// Package dlockotel turns the events of a dlock Locker into OpenTelemetry
// metrics and spans. It is a module of its own, so that programs that do
// not use OpenTelemetry never build it.
//
//	obs, err := dlockotel.New() // the global MeterProvider and TracerProvider
//	locker, err := redislock.New(rdb, dlock.WithObserver(obs))
//
// # Metrics
//
// All carry the attributes dlock.backend ("redis", "redlock", "etcd" or "postgres") and
// dlock.lock.name, the key made fit for a metric's attribute by
// [LockName] or the function given to [WithLockName]:
//
//	dlock.acquire.duration  histogram, s     how long TryLock and Lock took, with dlock.outcome:
//	                                         acquired, busy, timeout or error
//	dlock.hold.duration     histogram, s     how long holds lasted, from acquisition to release or loss
//	dlock.held              up-down counter  holds held now
//	dlock.waiting           up-down counter  Lock calls waiting now for a busy lock
//	dlock.lost              counter          holds lost, with dlock.reason: ownership_lost, lease_expired or other
//	dlock.renewal.failures  counter          renewals that failed
//
// A Prometheus exporter shows them as dlock_acquire_duration_seconds,
// dlock_hold_duration_seconds, dlock_held, dlock_waiting, dlock_lost_total
// and dlock_renewal_failures_total.
//
// # Spans
//
// A span dlock.acquire covers each TryLock and Lock call, from the call to
// its return, as a child of the span in the call's context; it is written
// when the call returns, with its true start time. A span dlock.hold
// covers each hold, from its acquisition to its release or loss, also a
// child of the acquiring call's span; a renewal that fails adds an event
// to it, and a loss ends it with an error status.
package dlockotel
