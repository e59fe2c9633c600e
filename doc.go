// Package dlock is what a program that takes distributed locks calls: the
// [Locker] and [Lock] interfaces, their options and errors, and [Do]. A
// driver makes the Locker: redislock, redlock, etcdlock or postgreslock.
//
//	err := dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
//		lk, _ := dlock.LockFrom(ctx) // its Fence guards the writes
//		return pay(ctx, lk.Fence())
//	})
//
// A busy lock is an error ([ErrNotAcquired]), never (nil, nil). A lock is a
// lease: renewed while held, lost visibly ([Lock.Done], [Lock.Err]), and
// fenced ([Lock.Fence] grows with every acquisition of a key), so that the
// storage it guards can refuse a writer whose lease passed to another.
package dlock
