// Package redislock is the Redis driver of dlock: a [dlock.Locker] over a
// go-redis v9 client (a single server, a Sentinel failover client, or a
// Cluster client).
//
//	locker, err := redislock.New(rdb)
//	lk, err := locker.TryLock(ctx, "order:42")
//	defer lk.Unlock(ctx)
//
// # Round trips
//
// Acquiring is one round trip: on the plain path a bare SET NX PX, as a
// hand-rolled lock sends it (a TryLock that finds the key busy asks with
// a GET whether it holds this attempt's own token, a SET the client sent
// twice: 2 round trips); with dlock.WithFencing, try.lua: SET NX PX and
// the fence increment, or the holder's remaining lease when busy; with an owner, in fair mode or while
// waiting, acquire.lua: the same plus reentry and the queue. Releasing is
// one (release.lua): compare-and-delete and the hand-over to the first
// waiter. Scripts go by EVALSHA and fall back to EVAL on NOSCRIPT. A
// contended acquisition costs one more, joining the queue: the grant
// reaches the waiter by pub/sub, and its watchdog extends it. dlock.LockAll
// of keys on one server or in one Cluster slot is one round trip too
// (lock_all.lua, see [Locker.TryLockMulti]), and so is their release.
//
// The goroutines of one Locker share round trips. To each server (each
// master of a Cluster), up to four commands go out on their own at once
// while the load is light, as from a plain client; beyond that, the
// commands issued meanwhile wait and leave together in one pipeline, and
// while a pipeline is on the wire the next commands wait for the one
// after it, so that batches grow with the load: 64 goroutines locking
// keys of their own make a round trip per 16 cycles or so instead of 2
// per cycle, and the client and the server spend a fraction of the CPU
// (see bench/RESULTS.md).
//
// # Timeouts
//
// An acquisition waits for the reply to each of its requests at most
// RequestTimeout (2s), whatever the client's own timeouts and retries: a
// TryLock returns within it, and a Lock with dlock.WithWait within its
// limit plus RequestTimeout, also when the server is out of reach or
// stopped. A request left unanswered is given back once it ends.
//
// To keep that bound on a client whose reads ignore the context, an
// acquisition's request runs on a worker goroutine that its caller waits
// for, so that a cancel ends the wait at once; under load, when requests
// leave together in pipelines, the caller waits for its pipeline, which a
// worker sends, and leaves it at its bound. On a *redis.Client with
// ContextTimeoutEnabled, a lone request is sent by its caller instead,
// which saves the two goroutine switches: about half the client CPU of an
// uncontended cycle. Such a client stops a read at the context's
// deadline, not at its cancel: a cancel that comes while the request is
// on the wire is seen once the reply comes, or at the bound.
//
// # Keys and wire compatibility
//
// A lock on key K is the string "<prefix>:lock:<K>" holding the token, so
// a client that follows redis.io's single-instance algorithm on that key
// contends correctly with this driver. Its companion keys (the fence
// counter, an owner's holds, the wait queue) are "{<lock key>}:<letter>",
// or "{T}:<lock key>:<letter>" when the lock key has a hash tag T, so that
// they share its Cluster slot; a prefix may not contain braces. The README
// describes each of them.
//
// # Safety
//
// A lock in one Redis is a lease: exclusive while Redis keeps its data. A
// restart without persistence or a failover to a replica that missed the
// write can grant it twice, and can repeat a fence. WithReplicaAck closes
// the second hole for a failover to an acknowledging replica: a write
// counts only once replicas have it. See the README's safety model; for
// locks that must survive server faults, use etcdlock, and fencing tokens
// either way.
//
// # Cluster
//
// Every script touches one slot. Waiters are woken through sharded pub/sub
// (SSUBSCRIBE to "<queue key>:<subscriber id>"): a Locker keeps one
// subscription connection per shard it waits on, opened when a waiter
// first needs it and closed when its channels have had no waiter for 30s.
// A subscription follows its slot: one that a master refuses (MOVED) or
// ends because the slot moved away is made again on the slot's new master.
// A held lock's renewals and release follow the slot too, through the
// client's MOVED and ASK redirections, also while the slot migrates. With
// WithReplicaAck, whose writes go with WAIT to the master's own
// connection, the driver follows them itself: after ASK the write goes to
// the importing master with ASKING, and WAIT there, in one round trip.
// Requires Redis 7.0 or later (SPUBLISH, and SET with both NX and GET, by
// which a re-sent attempt recognises its own token).
//
// # Semaphores and read-write locks
//
// A Locker is also a [dlock.Semaphore] ([Locker.TryAcquire],
// [Locker.Acquire]) and a [dlock.RWLocker] ([Locker.RLock],
// [Locker.WLock]). Their holds live in a sorted set per key,
// "<prefix>:sem:<key>" or "<prefix>:rw:<key>", each member scored by the
// end of its own lease, with the fence counter, the holds' kinds and
// owners, and the wait queue in companions of the same Cluster slot. One
// script call acquires or releases; the watchdog renews them in the same
// batches as locks; a release grants the waiters at the head of the
// queue that now fit and wakes them as a lock's release does.
//
// # Logs
//
// The driver logs only through the *slog.Logger of dlock.WithLogger, and
// is silent without one. go-redis has a logger of its own, global to the
// program, which prints a line for each failed dial while a server is
// down; a program that would rather not see them, as the dlock command,
// replaces it once in main:
//
//	type quiet struct{}
//
//	func (quiet) Printf(context.Context, string, ...any) {}
//
//	func main() {
//		redis.SetLogger(quiet{})
//		...
//	}
//
// A library should leave that choice to the program.
package redislock
