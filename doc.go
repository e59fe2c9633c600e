// Package dlock is the vocabulary shared by every dlock driver: the [Locker]
// and [Lock] interfaces, the options a caller passes to them, the errors they
// return, the owner identity that makes a lock reentrant, and [Do], which runs
// a function while holding a lock.
//
// The package imports only the standard library. Drivers live beside it:
// redislock (Redis 7 or later, through a go-redis client) and etcdlock (a
// module of its own, so that Redis-only programs never pull in gRPC). What
// drivers share, and the contract between them and this package, is in
// package driver, which users never need.
//
// # A lock in a few lines
//
//	lk, err := locker.TryLock(ctx, "order:42", dlock.WithTTL(30*time.Second))
//	if errors.Is(err, dlock.ErrNotAcquired) {
//		return errBusy // someone else holds it
//	}
//	if err != nil {
//		return err // the server could not be reached, a bad key, ...
//	}
//	defer lk.Unlock(ctx)
//
// Or let [Do] acquire, run and release:
//
//	err := dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
//		lk, _ := dlock.LockFrom(ctx) // its Fence guards the writes
//		return pay(ctx, lk.Fence())
//	})
//
// Busy is an error value, never (nil, nil) and never a boolean: test it with
// errors.Is(err, dlock.ErrNotAcquired), and read the holder's remaining lease
// from a [*NotAcquiredError] when you want a retry-after hint.
//
// # What a lease promises
//
// A distributed lock is a lease: it is held until it is released or its TTL
// runs out on the server. A process that pauses (garbage collection, a
// stopped VM, a slow network) can outlive its lease without knowing. dlock
// narrows that window in three ways: it renews held locks in the background
// (the watchdog), it tells the holder the moment a lock is lost
// ([Lock.Done] and [Lock.Err]), and it hands out a fencing token
// ([Lock.Fence]) that grows with every acquisition of a key, so that the
// storage a lock protects can refuse a writer whose lease has passed to
// someone else.
//
// # Watching the locks
//
// [WithObserver] hands a Locker's events to an [Observer]: each acquisition
// and how it ended, waits, wake-ups, renewals, releases and losses. The
// module github.com/dlock-go/dlock/dlockotel records them as OpenTelemetry
// metrics and spans; [WithLogger] takes a *slog.Logger for the Locker's
// log lines.
package dlock
