// Package etcdlock is the etcd driver of dlock: a [dlock.Locker] whose
// locks live in an etcd cluster, the strongly consistent choice among
// dlock's backends. It is a module of its own, so that programs using only
// Redis never pull in the etcd client and gRPC.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	locker, err := etcdlock.New(cli, dlock.WithTTL(15*time.Second))
//	lk, err := locker.TryLock(ctx, "order:42")
//
// # Leases and sessions
//
// etcd keeps a lock alive with a lease. Locks acquired with the Locker's
// TTL and the watchdog on (the default) share one lease (a session), kept
// alive by the Locker every ttl/3, started on first use and again after it
// ends. A lock with another TTL gets a session of its own, revoked when the
// lock is released. A lock acquired WithLease(ttl) gets a bare lease that
// nobody renews: it runs out ttl after acquisition unless Refresh renews
// it.
//
// While a handle reports held, etcd keeps the lock at least until the
// handle's local deadline: each keep-alive's deadline counts from the
// moment before its request was sent (a late reply cannot lengthen it),
// less a tenth for clock drift, and the handle is declared lost when the
// deadline passes without a renewal. A lease that ends for any reason,
// locally or in etcd, is no longer kept alive, so the keys on it go with it
// within its TTL; a key that an attempt whose reply was lost may have
// written on a live lease is deleted, in the background until etcd answers,
// and once such a delete has failed the lease is not renewed until it
// lands (see Release); a lease granted too late to be of use is revoked.
//
// etcd leases are whole seconds: a TTL below one second is an error
// matching [dlock.ErrInvalidTTL], and a fractional TTL is rounded up
// (1.5s becomes 2s). etcd may also raise a short lease to its own minimum,
// one and a half election timeouts.
//
// # Losing a lock
//
// A lock's Done channel closes, with an Err matching [dlock.ErrLockLost],
// when its key is deleted by someone else, when etcd says its lease is
// gone, or when the local lease deadline passes:
// the time of the last keep-alive answer (for a bare lease, of the grant
// request) plus the lease minus a tenth of it, the drift margin. The
// deadline comes before etcd can expire the lease when round trips take
// less than that margin, so a partitioned holder learns of the loss before
// another client can acquire. A hold learns of its lease's end at once;
// of its key's delete, from a watch on the key that it opens once it has
// lived a second, from the revision that created it, so that a delete made
// meanwhile is seen too: a short hold costs no watch, and a deleted key
// ends its hold within a second and a round trip. Lock values are safe for
// concurrent use.
//
// # Keys and holds
//
// Lock key K lives in the etcd range "<prefix>/lock/<K>/" (default prefix
// "dlock"), with '%' and '/' in K written %25 and %2F so that the range of
// "a" never holds the keys of "a/b". Each acquisition writes one key in that
// range, "<prefix>/lock/<K>/<token>", attached to its lease, whose value is
// the owner id (empty without owner). The lock is held while the range is
// not empty. The token of a hold without owner on the Locker's session is
// the session's, so that the Locker's holds of K reuse one etcd key, one
// after the other (etcd's conditions on a range visit every key deleted
// there since the last compaction, and reused names keep those few); other
// holds get a random token of their own. A hold is told apart from the
// earlier ones of its name by its create revision, its fence.
//
// An acquisition is one transaction: put our key if the range is empty,
// else read the range. With an owner (see [dlock.WithOwner]), when every
// key in the range carries the same owner id, a second transaction puts our
// key on the condition that nothing in the range was written since the
// read. So holds for one owner are counted exactly, whichever Locker or
// process makes them: each is a key of its own, with its own lease, and
// the lock is free when the last is deleted or expires. Without an owner, a
// Locker that already holds K refuses to acquire it again with
// [dlock.ErrAlreadyHeld].
//
// The fence of an acquisition is the create revision of its key. etcd
// revisions grow with every write to the cluster, so fences are strictly
// increasing for each key, across Lockers, owners and expiry.
//
// # Release
//
// Unlock deletes the hold's key, and a late or repeated Unlock never
// deletes a newer hold, even from the same session (etcd-io/etcd#22082:
// the concurrency Mutex deletes by key name, and a session's next Mutex of
// the key takes the same name). A repeated Unlock sends nothing; the next
// hold of the key waits in the Locker's table until the release's answer
// came back; and a name whose delete may still land (its answer never
// came, or its hold ended meanwhile) is never taken again: the session
// names its later holds with a new token. The delete is so a plain one,
// not a transaction. A hold that waited in line is released by a
// transaction that compares its create revision and deletes its key in
// the line too. Close releases every hold of the Locker, revokes its
// session, and stops its goroutines.
//
// A release that etcd does not answer (a partition, a server down) before
// its context ends has an unknown outcome. Unlock returns the error, and
// the hold ends all the same, released: Done closes and Err matches
// [dlock.ErrNotHeld] and the error, so [dlock.Do] and [dlock.Guard],
// which do not retry, leave no hold behind. Its key lapses within its TTL
// of the failed release: a lease of the hold's own is no longer kept
// alive (and is revoked in the background); a key on the Locker's session
// is deleted in the background, retried until etcd answers or Close, and
// the session is not renewed while that delete is pending. Once etcd
// answers, the delete lands and the renewal held back is sent at once, so
// the Locker keeps its session and its other holds; if etcd answers
// keep-alives but never the delete, the session runs out, and its other
// holds are lost with it, rather than keep the key for nobody. A Refresh
// on a session held back so returns an error. The hot path pays nothing
// for this: no request is added to an acquisition or a release that etcd
// answers.
//
// # Waiting
//
// A waiting Lock joins a line, the etcd range "<prefix>/wait/<K>/", with a
// key of its own on its session, and watches the delete of the key just
// ahead of it (the first in line watches the holds), as etcd's
// concurrency.Mutex does: a release wakes the next waiter alone, and a
// hand-off costs the same round trips whatever the number of waiters.
// Waiters are served in the order they came, but for TryLock, a Lock with
// a pinned lease ([dlock.WithLease]) and one with [dlock.WithNotify](false),
// which take a free lock without waiting in line, and for an owner's
// reentrant hold, which never waits behind the line. The retry strategy
// paces a fallback attempt in case an event is missed. A
// waiter whose session ends (its lease expired, or etcd could not be
// reached within it) returns at once with an error matching
// [dlock.ErrNotAcquired] and [dlock.ErrLeaseExpired], instead of waiting
// on (etcd-io/etcd#19597). There is no fair mode: WithFair(true) is an
// error matching [dlock.ErrInvalidOption].
//
// # When etcd cannot be reached
//
// The etcd client waits for a connection as long as a request's context
// lets it, so every request a call makes ends with the call's limit. A
// Lock with [dlock.WithWait] returns by its wait limit, plus at most
// [RequestTimeout] (5s) to withdraw its key from the queue, with an error
// matching [dlock.ErrNotAcquired], also when etcd did not answer in time
// (as when a busy lock's answer comes too late); a Lock without one waits,
// riding out the outage, until its context ends. TryLock and every other
// single attempt (WithWait(0) too) return within one RequestTimeout with
// the failed request's error, a *[dlock.KeyError] that does not match
// ErrNotAcquired: a server out of reach is not a busy lock, as with the
// Redis driver. The Locker's session is started by the Locker itself,
// within one RequestTimeout, so that a short wait that runs out does not
// cut the start short for the calls that come after it.
//
// # Semaphores and read-write locks
//
// A Locker is also a [dlock.Semaphore] ([Locker.TryAcquire],
// [Locker.Acquire]) and a [dlock.RWLocker] ([Locker.RLock],
// [Locker.WLock]). Each permit, read hold or write hold is a key of its
// own, "<prefix>/sem/<K>/<token>" or "<prefix>/rw/<K>/<token>", on the
// lease of the acquisition, as a lock's hold is; a waiter's key is there
// too, so the keys of K form a queue ordered by create revision. One
// transaction puts a key at the end and reads the queue: a permit is
// admitted while fewer keys than the limit are ahead of it, a reader while
// no writer of another owner is, a writer while no key of another owner
// is. So a waiting writer holds back the readers that come after it, and
// waiters are served in order. A waiter follows the queue with one watch
// and makes no request until a release, an expiry or a raised limit
// admits it; a transaction then confirms its key, and the revision of that
// write is its fence. Downgrade rewrites the writer's key as a reader's in
// one transaction: it keeps its place, lease and fence. An uncontended
// acquisition and release cost two writes, as a lock's do; a busy
// TryAcquire, TryRLock or TryWLock deletes the key it put (a second
// round trip). The latest acquisition's limit is the semaphore's: it is
// the value of "<prefix>/sem/<K>/", on the lease of that acquisition, and
// each permit's key records the limit it was taken with, which counts
// while no stored limit does.
//
// # Inspecting locks
//
// [Locker.Inspect], [Locker.List] and [Locker.ForceUnlock] show and clear
// locks for an operator (the dlock command's status, ls and unlock):
// holds, owner, remaining lease and fence of a lock, never its tokens.
// List reads the prefix's range in pages; ForceUnlock deletes every hold
// of a key in one transaction. etcd keeps nothing of a released lock, so
// the fence of a free lock is unknown (0), and a lock's waiters leave no
// trace in it. [Locker.InspectKind] and [Locker.ListKind] show semaphores
// and read-write locks, with their waiters. The test helper package etcdtest starts embedded etcd servers.
//
// # Why not concurrency.Mutex
//
// The driver keeps the Mutex's model (keys under a prefix, each on a
// session's lease, revisions as fences) but writes its own transactions:
// the Mutex names its key after the session's lease, so one session can
// make only one hold of a key, which rules out counting an owner's holds;
// it releases by key name (etcd-io/etcd#22082); and its Lock keeps waiting after
// its session ended (etcd-io/etcd#19597).
package etcdlock
