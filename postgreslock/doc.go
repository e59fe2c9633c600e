// Package postgreslock is the PostgreSQL driver of dlock: a
// [dlock.Locker] whose locks live in a lease table, for teams that run
// PostgreSQL and no Redis. It is a module of its own, on pgx v5, so that
// programs that use other backends never pull in pgx.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	locker, err := postgreslock.New(pool, dlock.WithTTL(15*time.Second))
//	err = locker.CreateTable(ctx) // or run Schema from your migrations
//	lk, err := locker.TryLock(ctx, "order:42")
//
// # Leases by the server's clock
//
// Each hold has a random token, the owner, the fence, and expires_at =
// now() + TTL by the server's clock, so clients' clocks never matter. A
// lock's hold is kept in its name's row of "<table>" while that row has
// no live hold; a further hold of the same owner (reentrancy), and every
// permit of a semaphore and hold of a read-write lock, is a row of
// "<table>_holds". An acquisition is one statement: a lock that is free
// is taken by one UPDATE of its name's row (by an INSERT of the row, the
// first time a name is taken), and anything else (a busy or reentrant
// one, a waiter's) runs the function "<table>_acquire" in the same
// statement; a busy key is
// answered without a write. A release nobody waits for is one UPDATE of
// the row too. Renewals of all the locks a Locker holds go in one
// statement per tick (UPDATEs of both tables joined with unnest of names
// and tokens), on the shared watchdog, every third of the TTL.
//
// Renewal and release are keyed on the token: sent again, they find the
// same hold or nothing, and change nothing else. So a reply that is lost
// is not a lost lock: the outcome is held, lost (the hold is gone) or
// unknown, and only "lost" or the local deadline ends a hold. The deadline
// counts on the client's monotonic clock from before the statement was
// sent (less a drift margin of 1% and 2ms); the server counts from its
// now(), which is later. A release whose reply is lost is sent again once;
// an acquisition whose reply is lost releases the hold it may have taken.
// A step of the server's wall clock (not its rate) shortens or lengthens
// every lease by as much: keep it synchronised.
//
// # What waits for the disk
//
// Acquisitions and renewals commit as the server's synchronous_commit
// says (on by default: their WAL is on disk before the reply). A release,
// a waiter's registration and its leaving do not wait: they set
// synchronous_commit off for their own transaction only. A crash can lose
// such a commit; a lost release leaves its hold to lapse at its lease,
// which delays the next holder but never lets two hold at once, and a
// lost registration leaves its waiter to its fallback attempt. The next
// acquisition waits for its own WAL, which comes after theirs, so it makes
// them durable too. An uncontended cycle thus waits for one disk flush,
// not two.
//
// TryLock, Unlock and Downgrade wait [RequestTimeout] at most for the
// server, whatever the connection does.
//
// # Fences
//
// The name's row in "<table>" keeps a counter that every acquisition bumps
// (never a renewal), and which is kept when the lock is released: fences
// never go back while the database keeps its data, and their storage is
// one row per name, not per acquisition. [Locker.CheckFence] (pgx) and
// [Locker.CheckFenceSQL] (database/sql) check a (key, fence) inside the
// caller's own transaction with SELECT … FOR SHARE of the hold's row (the
// name's row, or the hold's in "<table>_holds"): a holder that paused past
// its lease cannot commit writes to this database once someone else took
// the lock, since taking it updates the name's row (or deletes the
// hold's), and waits for the check's transaction to end.
//
// # Waiting
//
// A waiter registers itself with its failed attempt (a row of
// "<table>_waiters", which lapses if its process dies) and waits for a
// NOTIFY naming it on the Locker's one LISTEN session. A release sends one
// NOTIFY, to the longest waiter, and only when someone waits: an
// uncontended release sends none, for a NOTIFY serialises commits. The
// release of a lock (not of a semaphore's permit or a read-write lock)
// hands it to that waiter in its own transaction: a new fence, the
// waiter's token and lease, and the NOTIFY carries the fence, so the
// waiter holds the lock without a statement of its own. That commit waits
// for the WAL to reach the disk, as an acquisition's does. A grant whose
// waiter missed the NOTIFY is taken by the waiter's next attempt, handed
// on when the waiter stops waiting, or lapses at its lease when the
// waiter died. Each NOTIFY wakes every LISTEN session of the database on
// the server (PostgreSQL signals them all, and each drops what is not on
// its channel), so a release costs the server a little for every Locker
// that listens: some tens of microseconds of CPU each, so that with
// hundreds of waiting processes on one database a hand-off costs the
// server milliseconds, and the woken waiter comes later. A Locker that
// has had no waiter and no watch for 5s stops listening (UNLISTEN; it
// keeps the connection), and listens again when a waiter finds the lock
// busy or a watch starts: that waiter registers only once LISTEN is in
// force, so its first wait after a quiet spell costs an attempt more. A
// fallback attempt comes when the
// holder's lease would run out, and a third of the TTL after the last (at
// most 1s after it while the waiter could not register, its LISTEN
// session down): only a wake-up lost needs it, and hundreds of waiters
// polling every second would send more statements than the hand-offs.
// With dlock.WithNotify(false) there is no LISTEN session, and waiters
// poll at the retry strategy's pace. Waiters are woken in order of arrival, but a
// newcomer's TryLock may still come first: there is no fair mode, and
// WithFair(true) is an error matching [dlock.ErrInvalidOption].
//
// # Poolers
//
// The lock path keeps no session state of its own: no advisory locks, no
// SET beyond a statement's own transaction (set_config(…, true)). Its
// statements run in the pool's query mode, as every other query on that
// pool: pgx's default prepares each statement once per connection, which
// PgBouncer in transaction pooling mode follows from version 1.21 (with
// max_prepared_statements set); before it, give the pool
// default_query_exec_mode=exec, as its other queries need too. One
// statement is the exception: the renewal of a Locker's held locks, sent
// once a tick with arrays whose length changes, is not prepared (pgx's
// exec mode) in a pool that would cache it, so that the server plans it
// for each batch rather than settle on a generic plan. LISTEN
// needs a session of its own: give a direct connection with
// [WithListen], or turn notifications off.
//
// # Semaphores, read-write locks, watches, inspection
//
// A Locker is also a [dlock.Semaphore], a [dlock.RWLocker] (writers come
// first: a waiting writer holds back the readers that come after it; a
// reader asking for the write lock gets [dlock.ErrUpgrade]), a
// [driver.Watcher] (a watch registers itself so that acquisitions and
// releases of the key send a NOTIFY) and a [driver.KindInspector]
// (Inspect, List, ForceUnlock; the fence of a free lock is known, as the
// table keeps it). Locks, semaphores and read-write locks of one key live
// under different names: "<prefix>:lock:<key>", "<prefix>:sem:<key>" and
// "<prefix>:rw:<key>".
//
// # What it promises
//
// A lock is exclusive while the primary keeps its data. A failover to a
// streaming replica that missed the latest commits can hand a lock out
// twice and a fence again, unless commits wait for that replica
// (synchronous_commit with synchronous_standby_names). With the fence
// checked in the same transaction, writes to the same database stay
// exclusive even across a holder's pause.
//
// The test helper package pgtest starts PostgreSQL servers.
package postgreslock
