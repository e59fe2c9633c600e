// Package election elects one leader among many processes, and runs
// scheduled jobs at most once per tick across them, on top of any
// [dlock.Locker]: Redis, etcd, or another driver.
//
// # Leader election
//
//	e, err := election.New(locker, "billing-leader")
//	ld, err := e.Campaign(ctx, "10.0.0.7:8080") // blocks until elected
//	ld.Go(func(ctx context.Context) { serve(ctx, ld.Epoch()) })
//	...
//	err = ld.Resign(ctx) // waits for the work started with Go, then releases
//
// A leadership is a held lock on the election's key, acquired for an
// owner id of its own that carries the campaigner's value, with a fence:
// its [Leadership.Epoch], strictly greater than every earlier leader's, for
// the storage the leader writes to (refuse a write whose epoch is below
// the highest seen, and a leader that paused past its lease cannot
// overwrite its successor's work). [Leadership.Context] is cancelled the
// moment the leadership ends: the driver declares a lock lost at its local
// lease deadline, before the store could hand it to another campaigner, so
// a leader that keeps running learns of the loss before anyone else is
// elected. A leader that was stopped (a paused VM, SIGSTOP) learns it only
// when it runs again, after its successor began: only the epoch protects
// storage from it.
//
// Re-campaigning after a loss is the caller's choice: call Campaign again
// (see the Election example).
//
// # Observing the leader
//
// [Election.Leader] reads who leads now; [Election.Observe] reports the
// leader, then every change, vacancy included, as a stream. Observers are
// woken by the store's change notifications (a Redis channel that only
// changes of an observed key publish on, an etcd watch), not by polling:
// they read the lock again when told, or at the latest when the lease they
// last saw would have run out, since a lease that lapses is a change that
// Redis does not announce. They need a Locker that implements
// [dlock.Inspector] and [driver.Watcher], as every driver of dlock does
// (driver.Supports says whether a Locker does).
//
// # Scheduled jobs
//
// [RunOnce] runs a function if no other process is running it, and keeps
// the key taken for at least a given time after it started (ShedLock's
// lockAtLeastFor), so that hosts whose clocks disagree by less than that
// run one tick's job once between them, even if the process dies in the
// middle of the job. [TryRun] takes that lock alone, for a scheduler that
// runs the job itself (package gocronlock's Locker does).
package election
