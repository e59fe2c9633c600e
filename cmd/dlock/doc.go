// Command dlock runs a command while holding a distributed lock, kept in
// Redis or etcd, and shows who holds what. What flock(1) is on one machine,
// dlock is across machines: cron jobs, deploy scripts and migrations that
// must not run twice.
//
// Usage:
//
//	dlock run [flags] KEY -- CMD [ARGS...]
//	dlock run --etcd ENDPOINTS [flags] KEY -- CMD [ARGS...]
//	dlock status [--json] KEY
//	dlock ls [--json] [PATTERN]
//	dlock unlock --force KEY
//	dlock demo
//	dlock version
//
// # dlock run
//
// run acquires KEY, runs CMD with the lock held, and releases the lock when
// CMD ends. While CMD runs, the lease (--ttl, default 10s) is renewed every
// ttl/3, so a job may run for as long as it needs; if dlock dies, the lock
// frees when the lease runs out. CMD gets DLOCK_KEY, DLOCK_TOKEN and
// DLOCK_FENCE in its environment. DLOCK_FENCE is the fencing token: it is
// greater than the fence of every earlier acquisition of KEY, so a store
// that remembers the highest fence it has seen can refuse the late writes
// of a holder that lost its lock.
//
// --wait sets how long to wait for a busy lock: 0 (the default) fails at
// once, a duration (30s, 2m) or a number of seconds bounds the wait, and
// "forever" waits until the lock comes or dlock is interrupted. --fair
// serves waiters in arrival order; --owner ID makes the lock reentrant for
// ID, so that nested `dlock run` calls of one deploy share it. While dlock
// waits on a terminal, it keeps a one-line status on stderr (the holder's
// remaining lease and the time waited); never when stderr is not a
// terminal.
//
// When the lock is busy, or the wait runs out, dlock prints one line that
// names KEY and the holder's remaining lease ("retry after"), and exits 75
// (--conflict-exit-code changes it).
//
// When the lock is lost while CMD runs (the key was deleted, or Redis or
// etcd could not be reached to renew the lease before it ended), dlock
// sends CMD SIGTERM, then SIGKILL after --kill-grace (default 10s), and
// exits 76 (--lost-exit-code). A release that finds the lock already gone
// after CMD ends also exits 76: CMD may have run part of its time
// unprotected.
//
// SIGINT, SIGTERM and SIGHUP sent to dlock are forwarded to CMD, and dlock
// releases the lock after CMD exits. (A ^C typed at a terminal reaches CMD
// directly too, as both share the terminal's process group.) On Linux, CMD
// gets SIGTERM if dlock itself dies, even by kill -9.
//
// # Exit codes
//
//	0        CMD succeeded (or the command did)
//	1..125   CMD's own exit code, passed through
//	1        status, ls, unlock: Redis or etcd answered with an error; unlock: the lock was not held
//	2        usage error: unknown command or flag, missing KEY or CMD, --ttl below 100ms (1s on etcd),
//	         malformed URL or endpoint, --redis with --etcd
//	69       Redis or etcd could not be reached within the dial timeout, or failed while dlock acquired
//	         the lock (EX_UNAVAILABLE)
//	75       the lock is busy, or --wait ran out (EX_TEMPFAIL; --conflict-exit-code)
//	76       the lock was lost while CMD ran (--lost-exit-code)
//	126      CMD was found but could not be run
//	127      CMD was not found
//	128+N    CMD died of signal N, or dlock was interrupted by signal N while waiting
//
// # Inspecting locks
//
// status prints whether KEY is held, its remaining lease, its fencing
// counter, its owner when it is an owner's lock, and its queued waiters.
// ls lists the held locks whose key matches PATTERN (Redis glob syntax, on
// both stores), walking the keyspace with SCAN, never KEYS (on etcd:
// reading the prefix's range in pages of 500 keys). unlock --force deletes
// a stuck lock whoever holds it (on etcd, every hold of it, in one
// transaction) and prints what it deleted; without --force it refuses.
// --json prints JSON objects with the fields key, held, owner, holds,
// ttl_ms (-1: no expiry), fence and waiters. No command ever prints a
// lock's token.
//
// etcd keeps nothing of a released lock and waiters leave no trace in it:
// on etcd, status prints "-" for the fence of a free lock and for the
// waiters, ls prints "-" in its WAITERS column, and --json gives fence 0
// for a free lock and no waiters field. Its leases are whole seconds,
// truncated: a ttl of 0s means less than a second is left.
//
// # Choosing the Redis server
//
// --redis URL, else $DLOCK_REDIS_URL, else redis://127.0.0.1:6379/0. The
// password comes from the URL or from $DLOCK_REDIS_PASSWORD, and is never
// printed. The forms:
//
//	redis://[USER:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]      one server
//	rediss://...                                            one server over TLS
//	unix://[USER:PASSWORD@]/PATH/TO/SOCKET[?db=DB]          one server on a unix socket
//	redis+sentinel://[USER:PASSWORD@]HOST:PORT[/DB]?master_name=NAME[&addr=HOST:PORT...]
//	                                                        Sentinel; the user information is the sentinels'
//	redis+cluster://HOST:PORT[?addr=HOST:PORT...]           Cluster, found from one or more nodes
//	redis://HOST:PORT,redis://HOST:PORT,...                 Cluster, as a comma list
//
// rediss+sentinel:// and rediss+cluster:// add TLS. OPTIONS are go-redis's
// URL options, such as dial_timeout=2s (default 5s), read_timeout=1s and
// max_retries=2. --prefix (default "dlock") is the namespace of the keys:
// KEY is stored as PREFIX:lock:KEY.
//
// # Using etcd
//
// --etcd ENDPOINTS, or $DLOCK_ETCD_ENDPOINTS when no --redis or --etcd flag
// is given, keeps the locks in an etcd cluster instead: the strongly
// consistent choice. ENDPOINTS is a comma list of HOST:PORT,
// http://HOST:PORT, https://HOST:PORT (TLS with the system's roots),
// unix://PATH or unixs://PATH. --redis with --etcd is a usage error, and so
// is $DLOCK_REDIS_URL with $DLOCK_ETCD_ENDPOINTS when no flag chooses. dlock
// gives up on a cluster that does not answer a read within the dial
// timeout, $DLOCK_ETCD_DIAL_TIMEOUT (default 5s), with one line naming the
// endpoints, and exits 69.
//
// etcd leases are whole seconds: --ttl must be at least 1s, and a
// fractional one is rounded up (1.5s becomes 2s). --fair is not available:
// etcd waiters are woken, in no particular order, by a watch on the key.
// KEY's holds are stored under PREFIX/lock/KEY/, with '%' and '/' in KEY
// written %25 and %2F, and the fence is the create revision of the hold,
// which grows with every write to the cluster.
//
// # dlock demo
//
// demo starts a private redis-server on a free loopback port (or, when none
// is installed, an in-process stand-in, and says so), then shows workers
// contending for one key: acquisitions, hand-offs, a holder that crashes
// mid-job and the lock recovered when its lease runs out, and fences rising
// so that the crashed holder's late write is refused. It takes under ten
// seconds and stops everything it started.
package main
