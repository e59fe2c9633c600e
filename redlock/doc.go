// Package redlock is dlock's Redlock driver: a [dlock.Locker] over N
// independent Redis masters (no replication between them, usually 3 or 5),
// where a lock is held when a majority of them granted it within its
// validity.
//
//	locker, err := redlock.New([]redis.UniversalClient{rdb1, rdb2, rdb3})
//	lk, err := locker.TryLock(ctx, "order:42")
//	defer lk.Unlock(ctx)
//
// # Acquire, renew, release
//
// Every request goes to every node at once, each bounded by the per-node
// timeout ([WithNodeTimeout], at most TTL/2). An acquisition succeeds when
// a majority granted it and its validity is left: the lease's local
// deadline is the moment before the requests were sent, plus the TTL,
// less the drift margin (TTL/100 + 2ms); a majority that answers after
// that is no lock. A failed attempt gives back what it took, on every node
// at once, and a node that answers late gives back what it granted then.
// The watchdog (package driver's) renews every ttl/3 on every node at once;
// a renewal that a majority confirmed moves the deadline, and a lock whose
// renewals cannot reach a majority is declared lost at the deadline, by the
// watchdog's clock: before another client could form a majority, for every
// majority shares a node with the one that last confirmed the lease, and
// that node keeps the key past the deadline. A lock that so many nodes no
// longer hold that no majority can is lost at once.
//
// When too few nodes answer for a majority to decide, calls return an
// error matching ErrNoQuorum, joined with each node's error; a busy lock is
// dlock.ErrNotAcquired, as with every driver.
//
// A lock's UnlockAfter (see [driver.Lapser]) sets every node's lease to
// the lapse instead of deleting the key: the key stays held on a majority
// until then, whatever becomes of the process, as scheduled jobs need.
//
// # Fences
//
// Every acquisition gets a fencing token, strictly greater than every
// fence handed out before for the key, also while a minority of the nodes
// is down, slow or restarted: any two majorities share a node, whose
// counter never goes down (see RestartDelay for nodes that lose their
// data). An
// acquisition costs one round trip to the nodes when their counters agree,
// and two when they do not (after a restart).
//
// # Waiting
//
// See [Locker.Lock]: waiters queue on every node in one order, and a
// release hands each node's part to the first waiter and wakes only it.
//
// # Read-write locks
//
// The Locker is a [dlock.RWLocker] (see [Locker.TryRLock]): every node
// keeps a key's read and write holds under the Redis driver's rules
// (readers overlap, a writer excludes everyone else, a waiting writer
// holds new readers back), and a read or write hold is held when a
// majority of the nodes granted it within its validity, as a lock is. Any
// two majorities share a node, and no node grants a write hold beside
// another hold, so a writer never holds a majority while a reader or
// another writer does. Holds are reentrant by owner, an owner's upgrade
// fails with dlock.ErrUpgrade, [dlock.Downgrade] works on every node at
// once, and every hold is fenced from one counter per key, so a write
// lock's fence grows.
//
// # No semaphore
//
// The Locker is not a [dlock.Semaphore], and no Redlock Locker will be: a
// majority of independent masters cannot bound the number of permits. A
// lock is exclusive because any two majorities share a node, and that
// node refuses the second holder. A node of a semaphore admits up to the
// limit, so with a limit above one the shared node no longer refuses:
// with 3 nodes and a limit of 2, permits A on nodes {1, 2}, B on {2, 3}
// and C on {1, 3} leave each node with exactly 2 holders, and all three
// hold a majority: 3 permits of 2. (A write hold is safe for the lock's
// reason: no node grants it beside another hold.) For semaphores, use
// etcd (package etcdlock) or one Redis deployment (package redislock).
//
// # Watching
//
// The Locker is a [driver.Watcher] (see [Locker.Watch]): every node
// publishes the changes of a watched lock's holder, and a watch listens
// on every node, so that package election's observers follow a Redlock
// election without polling.
//
// # Keys
//
// The keys are the Redis driver's, on every node: the lock key of K is
// "<prefix>:lock:<K>" holding the token, so that tools reading one server
// find it; the read-write lock of K lives under "<prefix>:rw:<K>" and its
// companions, in the Redis driver's layout.
//
// # Safety
//
// Redlock assumes that the nodes' clocks run at about the same rate as the
// client's (within the drift margin), and that a node that lost its data
// stays out for RestartDelay. Like any lease, a lock does not protect work
// that a paused holder goes on doing after its lease: pass Fence to the
// storage the lock protects, and have it refuse a fence lower than one it
// has seen.
package redlock
