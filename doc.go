// Package dlock is what a program that takes distributed locks calls: the
// [Locker] and [Lock] interfaces, their options and errors, owners that
// make a lock reentrant, and [Do], which runs a function while it holds a
// lock. A driver makes the Locker: redislock (one Redis server, Sentinel or
// Cluster), redlock (a majority of independent Redis masters), etcdlock
// and postgreslock.
//
//	err := dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
//		lk, _ := dlock.LockFrom(ctx) // its Fence guards the writes
//		return pay(ctx, lk.Fence())
//	})
//
// A busy lock is an error, never (nil, nil): errors.Is(err, [ErrNotAcquired]).
// A lock is a lease: renewed in the background while held, lost visibly
// ([Lock.Done], [Lock.Err]), and fenced ([Lock.Fence] grows with every
// acquisition of a key), so that the storage it protects can refuse a
// writer whose lease passed to someone else. [WithObserver] and
// [WithLogger] show what a Locker does.
package dlock
