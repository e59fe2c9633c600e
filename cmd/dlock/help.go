package main

import (
	"fmt"
	"io"
)

// The reference of dlock lives here and only here: `dlock help` prints it,
// and cmd/dlock/README.md is generated from that output (see
// TestReference).

// A command is one verb of dlock.
type command struct {
	name, args, short string
	long              string // the text of `dlock help NAME`, between the usage line and the flags
	run               func(e *env, args []string) int
}

// A topic is a page of `dlock help` that is not a command.
type topic struct {
	name, short, text string
}

var commands []*command // filled by init: the table refers to help, which reads it

func init() {
	commands = []*command{
		{"run", "[flags] KEY -- CMD [ARGS...]", "run CMD while holding the lock KEY", runHelp, cmdRun},
		{"status", "[flags] KEY", "show what is held of KEY: state, owner, holds, lease, fence", statusHelp, jsonErrors(cmdStatus)},
		{"ls", "[flags] [PATTERN]", "list the held locks, semaphores and read-write locks", lsHelp, jsonErrors(cmdList)},
		{"top", "[flags] [PATTERN]", "watch what dlock ls lists, refreshed every second", topHelp, cmdTop},
		{"unlock", "--force [flags] KEY", "delete a stuck lock, whoever holds it", unlockHelp, jsonErrors(cmdUnlock)},
		{"leader", "[flags] KEY", "print the leader of the election on KEY (--watch: follow it)", leaderHelp, jsonErrors(cmdLeader)},
		{"demo", "", "watch workers contend for one lock on a private Redis", demoHelp, cmdDemo},
		{"version", "", "print the version", "", cmdVersion},
		{"help", "[COMMAND|TOPIC]", "show the help of a command or topic", "", cmdHelp},
	}
}

var topics = []topic{
	{"exit-codes", "what dlock's exit codes mean", exitCodesHelp},
	{"redis", "choosing the Redis server: URLs, Sentinel, Cluster", redisHelp},
	{"etcd", "keeping the locks in etcd instead", etcdHelp},
	{"postgres", "keeping the locks in PostgreSQL instead", postgresHelp},
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: dlock COMMAND [ARGS]\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, "\nTopics (dlock help TOPIC):\n\n")
	for _, t := range topics {
		fmt.Fprintf(w, "  %-11s %s\n", t.name, t.short)
	}
	fmt.Fprint(w, "\nRun `dlock help COMMAND` for its flags; the flags that say where the locks\n"+
		"are (--redis, --etcd, --postgres, --prefix, --etcd-*) and --json may also come\nbefore COMMAND.\n"+
		"Every duration is a Go duration (1.5s, 2m, 500ms) or a number of seconds.\n"+
		"The Redis server comes from --redis URL\n"+
		"or DLOCK_REDIS_URL (default "+defaultRedisURL+"); an etcd cluster, used\n"+
		"instead, from --etcd ENDPOINTS or DLOCK_ETCD_ENDPOINTS; a PostgreSQL database\n"+
		"from --postgres URL or DLOCK_POSTGRES_URL.\n\n"+
		"Examples:\n\n"+examples)
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func lookupTopic(name string) *topic {
	for i := range topics {
		if topics[i].name == name {
			return &topics[i]
		}
	}
	return nil
}

const examples = `  dlock demo                                 # a private redis-server, workers contending, a paused holder fenced off
  dlock run nightly-report -- ./report.sh    # fails at once (exit 75) when another host runs it
  dlock run --wait 5m --ttl 30s migrate -- ./migrate up
  dlock run --limit 3 --wait forever encode -- ./encode.sh   # at most 3 at once, across hosts
  dlock run --shared config -- ./read-config.sh             # readers together; --exclusive alone
  dlock status migrate                       # held or free, lease left, fence, owner
  dlock ls 'cron:*'                          # held locks; --json for scripts
  dlock top                                  # held locks, live: lease, fence, waiters, age
  dlock unlock --force migrate               # delete a stuck lock, printing what was deleted
  dlock run --hold-at-least 30s report -- ./report.sh   # in cron on every host: once per tick
  dlock leader --watch billing-leader        # the leader's value and epoch, at each change
  dlock run --etcd 10.0.0.1:2379 migrate -- ./migrate up   # the lock in etcd instead
`

const runHelp = `
Acquires KEY, runs CMD with the lock held and renewed every ttl/3, releases
it when CMD ends, and exits with CMD's exit code (128+N when CMD died of
signal N). A job may run for as long as it needs; if dlock dies, the lock
frees when its lease runs out. CMD gets DLOCK_KEY, DLOCK_TOKEN and
DLOCK_FENCE in its environment. DLOCK_FENCE is the fencing token: it is
greater than the fence of every earlier acquisition of KEY, so a store that
remembers the highest fence it has seen can refuse the late writes of a
holder that lost its lock.

Flags go before KEY, or after it when -- comes between KEY and CMD (put
-- there whenever CMD has flags). -n fails at once and -w DURATION bounds
the wait, as in flock(1).

--wait 0 (the default) fails at once; a duration (30s, 2m) or a number of
seconds bounds the wait; "forever" waits until the lock comes or dlock is
interrupted. --fair serves waiters in arrival order; --owner ID makes the
lock reentrant for ID, so that nested dlock run calls of one deploy share
it. While dlock waits on a terminal, it keeps a one-line status on stderr
(the holder's remaining lease and the time waited).

--limit N runs CMD as one of at most N holders of KEY, as consul lock -n
does: each holder has a permit of KEY's semaphore, a lease of its own
renewed while CMD runs, and a permit whose holder died comes back when its
lease ends. The latest holder's N is KEY's: holders above a lowered N keep
their permits until they finish. --shared and --exclusive take KEY's
read-write lock: any number of --shared holders run at once, an
--exclusive one runs alone, and once an --exclusive one waits, new
--shared ones wait behind it. The semaphore and the read-write lock of KEY
live beside its lock: a plain dlock run KEY excludes neither.

When the lock is busy, or --wait runs out, dlock prints one line naming KEY
and the holder's remaining lease, and exits with --conflict-exit-code.
When the lock is lost while CMD runs (the key was deleted, or the server
could not be reached to renew the lease before it ended), dlock sends CMD
SIGTERM, then SIGKILL after --kill-grace, and exits with --lost-exit-code.
A release that finds the lock already gone after CMD ends exits the same
way: CMD may have run part of its time unprotected.

--hold-at-least DURATION keeps KEY taken for at least DURATION from the
acquisition: when CMD ends sooner, dlock sets the lock's lease to what is
left and exits, so the key frees by itself then. Put dlock run
--hold-at-least in the same cron line on every host, with DURATION longer
than the hosts' clocks disagree and shorter than the schedule's period:
a fast job then runs once per tick, not once per host whose clock lags.

SIGINT, SIGTERM and SIGHUP sent to dlock are forwarded to CMD; the lock is
released after CMD exits. If dlock itself is killed, CMD gets SIGTERM
(Linux) and the lock frees when its lease runs out.

With --etcd, the lease is whole seconds: --ttl must be at least 1s, and a
fractional one is rounded up (1.5s becomes 2s); --fair is not available.
With --postgres, --fair is not available either.
A flag the store cannot honour is refused before CMD runs, with exit 2 and
one line saying why: --limit on Redlock, whose independent masters cannot
bound permits, or --hold-at-least, --shared or --exclusive where the
driver does not offer UnlockAfter or read-write locks.

Exit codes: CMD's own; 2 usage; 69 Redis or etcd unreachable; 75 busy; 76
lock lost; 77 login or TLS refused; 78 configuration refused; 126 CMD not
executable; 127 CMD not found; 128+N signal N. See dlock help exit-codes.`

const statusHelp = `
Prints what is held of KEY, as a table with the columns of dlock ls and
dlock top: a row for KEY's lock, and one for its semaphore (dlock run
--limit) and its read-write lock (--shared, --exclusive) when they are
held or waited for. The lock's row is left out when it is free and
another row shows. It never prints tokens. --json prints the rows as an
array of objects, as dlock ls --json does.

etcd keeps no fence of a free lock and does not count a lock's waiters:
the table shows "-" for them (--json: fence 0 and no waiters field); it
counts the waiters of a semaphore or read-write lock. etcd leases are
whole seconds, truncated: a TTL of 0ms means less than a second is left.
See dlock help ls for the columns.`

// tableHelp describes the columns of status, ls and top.
const tableHelp = `The columns are the same in status, ls and top, and name the fields of
--json in lower case (ttl_ms for TTL):

  KEY      the key
  KIND     lock, semaphore (dlock run --limit) or rwlock (--shared,
           --exclusive)
  STATE    free, held, or full: a semaphore with every permit out
  OWNER    the owner id of an owner's lock (--owner), else -
  HOLDS    a lock's holds (an owner's lock may have several); a
           semaphore's permits out of its limit, 2/3; a read-write
           lock's readers and writer, 3r or 1w (--json: holds, limit,
           readers)
  TTL      the remaining lease, the longest among a semaphore's or a
           read-write lock's holds; "never" for a key with no expiry
  FENCE    the fence of the latest acquisition (run fences every one)
  WAITERS  the callers queued for it; "-" where the store does not
           count them`

const lsHelp = `
Lists the held locks, semaphores and read-write locks whose key matches
PATTERN (Redis glob syntax on both stores; default all), a row for each,
sorted by key. On Redis it walks the keyspace with SCAN, never KEYS, so it
does not block a busy server; on etcd it reads the prefix's range in pages
of 500 keys. --json prints an array of objects, one per row.

` + tableHelp

const unlockHelp = `
Deletes KEY's lock whoever holds it (on etcd, every hold of it, in one
transaction), and hands it to the first waiter. This breaks the mutual
exclusion the lock gave its holder, if alive: the holder learns at its next
renewal (on etcd, at once) that it lost the lock, and dlock run then stops
its CMD. It refuses without --force and prints what it deleted.`

const leaderHelp = `
Prints who leads the election on KEY, as processes that campaign with
dlock's election package hold it: the leader's value (what it campaigned
with, such as its address) and its epoch (the fence of its election, which
grows with every leader), separated by a tab; or "vacant". --watch prints
the leader, then a line at each change, vacancy included, each starting
with the time it was seen, until dlock is interrupted (exit 128+N). It is
woken by the store's change notifications, not by polling, and reads the
lock again at the latest when the leader's lease would have run out.
--json prints one object a line with the fields key, elected, value, epoch
(and time, with --watch).`

const demoHelp = `
Starts a private redis-server on a free loopback port (or, when none is
installed, an in-process stand-in, and says so), then shows workers
contending for one key: acquisitions, hand-offs, a holder that freezes
mid-job (as in a long GC pause) and the lock recovered when its lease runs
out, and fencing tokens rising so that the paused holder's late write,
when it wakes up, is refused. It takes under 10 seconds and stops
everything it started.`

const exitCodesHelp = `
dlock run passes CMD's own exit code through, so the codes of dlock itself
sit where commands rarely go.

  0        CMD succeeded (or the command did)
  1..125   CMD's own exit code, passed through
  1        status, ls, unlock: Redis or etcd answered with an error;
           unlock: the lock was not held
  2        usage error: unknown command or flag, missing KEY or CMD, --ttl
           below 100ms (1s on etcd), malformed URL or endpoint, --redis
           with --etcd, a flag the store cannot honour (--limit on
           Redlock)
  69       Redis or etcd could not be reached within the dial timeout, or
           failed while dlock acquired the lock (EX_UNAVAILABLE)
  77       Redis or etcd refused the login: a wrong user or password, or
           none given to a server that wants one; or the TLS handshake
           with etcd failed: a certificate of an unknown authority, or a
           client certificate missing or refused (EX_NOPERM)
  78       Redis refused the configuration: a database number the server
           does not have, or a master name the sentinels do not know
           (EX_CONFIG)
  75       the lock is busy (every permit out, for --limit), or --wait
           ran out (EX_TEMPFAIL; --conflict-exit-code)
  76       the lock was lost while CMD ran (--lost-exit-code)
  126      CMD was found but could not be run
  127      CMD was not found; the lock was not taken
  128+N    CMD died of signal N, or dlock was interrupted by signal N while
           waiting`

const redisHelp = `
The server is --redis URL, else $DLOCK_REDIS_URL, else
redis://127.0.0.1:6379/0. The password comes from the URL or from
$DLOCK_REDIS_PASSWORD, and is never printed. The forms:

  redis://[USER:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]   one server
  rediss://...                                         one server over TLS
  unix://[USER:PASSWORD@]/PATH/TO/SOCKET[?db=DB]       one server on a unix socket
  redis+sentinel://[USER:PASSWORD@]HOST:PORT[/DB]?master_name=NAME[&addr=HOST:PORT...]
                                                       Sentinel; the user information
                                                       is the sentinels'
  redis+cluster://HOST:PORT[?addr=HOST:PORT...]        Cluster, found from one or more nodes
  redis://HOST:PORT,redis://HOST:PORT,...              Cluster, as a comma list
  redis+redlock://[USER:PASSWORD@]HOST:PORT[/DB][?OPTIONS],HOST:PORT,...
                                                       Redlock over 3 or more independent
                                                       servers: a lock is held when a
                                                       majority grants it; status and ls
                                                       report what a majority holds

rediss+sentinel://, rediss+cluster:// and rediss+redlock:// add TLS. OPTIONS are go-redis's
URL options, such as dial_timeout=2s (default 5s), read_timeout=1s and
max_retries=2. With Redlock, read_timeout also bounds each request to one
node (default 100ms there; at most half the lease). --prefix (default "dlock") is the namespace of the keys: KEY
is stored as PREFIX:lock:KEY.`

const etcdHelp = `
--etcd ENDPOINTS, or $DLOCK_ETCD_ENDPOINTS when no --redis or --etcd flag
is given, keeps the locks in an etcd cluster instead: the strongly
consistent choice. ENDPOINTS is a comma list of HOST:PORT,
http://HOST:PORT, https://HOST:PORT (TLS with the system's roots),
unix://PATH or unixs://PATH. --redis with --etcd is a usage error, and so
is $DLOCK_REDIS_URL with $DLOCK_ETCD_ENDPOINTS when no flag chooses. dlock
gives up on a cluster that does not answer a read within
$DLOCK_ETCD_DIAL_TIMEOUT (default 5s), with one line naming the endpoints,
and exits 69.

A cluster with authentication on takes --etcd-user USER[:PASSWORD] (or
$DLOCK_ETCD_USER, with the password in $DLOCK_ETCD_PASSWORD, which keeps it
out of the process list); a refused login exits 77. TLS: --etcd-cacert FILE
names the CAs that sign the cluster's certificate (default: the system's),
--etcd-cert FILE and --etcd-key FILE the client certificate of a cluster
that asks for one (or $DLOCK_ETCD_CACERT, $DLOCK_ETCD_CERT,
$DLOCK_ETCD_KEY). A file that cannot be read is a usage error; a TLS
handshake that fails exits 77 and says why.

For a local etcd: apt-get install etcd-server (Debian) installs etcd,
which serves http://127.0.0.1:2379 when run with no flags, as does the
etcd release binary.

etcd leases are whole seconds: --ttl must be at least 1s, and a fractional
one is rounded up (1.5s becomes 2s). --fair is not available: etcd waiters
are woken, in no particular order, by a watch on the key. KEY's holds are
stored under PREFIX/lock/KEY/, with '%' and '/' in KEY written %25 and %2F,
and the fence is the create revision of the hold, which grows with every
write to the cluster. etcd keeps nothing of a released lock, and waiters
leave no trace in it.`

const postgresHelp = `
--postgres URL, or $DLOCK_POSTGRES_URL when no --redis, --etcd or
--postgres flag is given, keeps the locks in a PostgreSQL database: for
teams that run no Redis. URL is postgres://USER[:PASSWORD]@HOST[:PORT]/DB
with libpq's options (sslmode=require, connect_timeout=2), or a libpq
key=value string; the password may also come from $PGPASSWORD or
~/.pgpass. Naming two stores is a usage error. dlock gives up on a server
that does not answer within connect_timeout (default 5s), with one line
naming it, and exits 69; a refused login exits 77, a database that does
not exist 78.

The locks live in the tables dlock, dlock_holds and dlock_waiters, which
dlock creates on first use when they are missing (the user needs the
privilege to create tables); or create them in a migration with the DDL
that the Go package postgreslock exports as Schema. A lease is counted by
the server's clock, the fence of KEY is a counter kept in its row, which
grows with every acquisition and is kept after the release, and KEY's
holds are rows named PREFIX:lock:KEY. A release wakes the longest waiter
at once; --fair is not available, since a newcomer may still come first.
PgBouncer in transaction pooling mode is fine for the locks; waiters are
woken through LISTEN, which needs a direct connection, and otherwise poll.`
