package postgreslock

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// drift is the margin taken off every lease for the server's clock
// running faster than the client's.
var drift = driver.Drift{Divisor: 100, Floor: 2 * time.Millisecond}

// backend names the driver in events and errors.
const backend = "postgres"

// Locker hands out locks kept in PostgreSQL tables. It implements
// [dlock.Locker], [dlock.Semaphore], [dlock.RWLocker], [driver.Watcher]
// and [dlock.Inspector]; create it with [New]. Its methods
// are safe for concurrent use.
type Locker struct {
	pool  *pgxpool.Pool
	table string
	sql   statements
	opts  dlock.Options
	id    string // names this Locker's waiters
	seq   atomic.Uint64

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines of spawn
	mu     sync.Mutex     // guards stopped, and wg's count against its Wait
	// stopped is set by Close before it waits for wg: no goroutine
	// starts after that.
	stopped bool

	// tries bound TryLock's statements (Close ends them), releases
	// the releases' and downgrades', when the caller's context never ends.
	tries, releases bounds
	known           known // names whose row is there

	tables driver.Tables[*hold]
	wd     driver.Watchdog[*hold]
	ln     *listener

	beforeWatchStart func() // a test's hook, nil outside tests
}

var (
	_ dlock.Locker         = (*Locker)(nil)
	_ dlock.Inspector      = (*Locker)(nil)
	_ driver.KindInspector = (*Locker)(nil)
	_ dlock.Semaphore      = (*Locker)(nil)
	_ dlock.RWLocker       = (*Locker)(nil)
	_ driver.Watcher       = (*Locker)(nil)
	_ driver.Declarer      = (*Locker)(nil)
)

// New returns a Locker over pool. The options become the Locker's
// defaults (see [dlock.Option]); [WithTable] and [WithListen] are this
// driver's own. The Locker does not own the pool: close it after the
// Locker. The tables must exist (see [Locker.CreateTable] and [Schema]).
// The pool runs the driver's statements, in its query mode; it may go
// through a pooler in transaction mode (PgBouncer): the driver keeps no
// session state of its own on it (see the package's notes on poolers for
// prepared statements, and [WithListen] for notifications).
//
// It returns an error matching [dlock.ErrNilClient] when the pool is nil,
// [dlock.ErrInvalidOption] for a bad table name or fair mode (which the
// driver does not offer), and [dlock.ErrInvalidTTL] or
// [dlock.ErrInvalidOption] when an option is out of range.
func New(pool *pgxpool.Pool, opts ...dlock.Option) (*Locker, error) {
	if pool == nil {
		return nil, dlock.ErrNilClient
	}
	o, err := driver.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	own, _ := driver.Own[settings](o) // checkOptions checked it
	table, listen := cmp.Or(own.table, DefaultTable), own.listen
	if listen == nil {
		listen = pool.Config().ConnConfig
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{pool: pool, table: table, sql: newStatements(table), opts: o,
		id: driver.NewToken(), ctx: ctx, cancel: cancel}
	l.tries.parent, l.releases.parent = ctx, context.Background()
	l.ln = newListener(l, listen.Copy())
	l.tables.Init(backend, o, func(h *hold) { l.wd.Remove(h) })
	if err := l.wd.Init(driver.WatchdogConfig[*hold]{
		Drift:   drift,
		Renew:   l.renew,
		Lost:    func(h *hold, cause error) { h.tbl.Lose(h, cause) },
		Lapsed:  func(h *hold) { h.tbl.End(h, h.Wrap("unlock", dlock.ErrNotHeld)) },
		Renewed: func(h *hold, err error) { h.tbl.Renewed(h, err) },
		OnFailure: func(n int, err error) {
			o.Logger.Warn("renewal failed", "locks", n, "error", err)
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	return l, nil
}

var (
	errNoFair = fmt.Errorf("%w: postgreslock has no fair mode (WithFair(true)): a release wakes the longest waiter, but a newcomer may still take the lock first", dlock.ErrInvalidOption)
)

func checkOptions(o dlock.Options) error {
	if _, err := driver.Own[settings](o); err != nil {
		return err
	}
	switch {
	case o.Fair:
		return errNoFair
	case o.TTL < time.Millisecond:
		return fmt.Errorf("%w: %v is below 1ms, the resolution of the lease table", dlock.ErrInvalidTTL, o.TTL)
	}
	return nil
}

// Unsupported returns nil: the driver offers every feature.
func (l *Locker) Unsupported(driver.Feature) error { return nil }

// Table returns the name of the Locker's lease table.
func (l *Locker) Table() string { return l.table }

// nameOf is the row name of key's lock of kind k: "<prefix>:lock:<key>",
// "<prefix>:sem:<key>" or "<prefix>:rw:<key>".
func (l *Locker) nameOf(k driver.HoldKind, key string) string {
	return l.opts.Prefix + ":" + k.Space() + ":" + key
}

// NameOf returns the value of the name column of key's lock in the lease
// tables: what [CheckFence] looks up.
func (l *Locker) NameOf(key string) string { return l.nameOf(driver.HoldLock, key) }

// TryLock makes one attempt to acquire key. See [dlock.Locker.TryLock].
func (l *Locker) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldLock, key, 0, false, opts)
}

// Lock waits for key until it holds it, ctx ends, the WithWait limit
// passes or the retry strategy gives up. A release hands the lock to the
// longest waiter and wakes it through its Locker's LISTEN session (see
// the package's notes on waiting); a fallback attempt comes
// at the latest when the holder's lease would run out, and at most a
// third of the TTL after the last. With dlock.WithNotify(false) waiters
// poll at the retry strategy's pace.
func (l *Locker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldLock, key, 0, true, opts)
}

// Unlock releases this Locker's most recent hold on key for the owner in
// ctx (see [dlock.Locker.Unlock]).
func (l *Locker) Unlock(ctx context.Context, key string) error {
	h, err := l.tables.Locks.Find(ctx, key)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}

// Close releases every lock the Locker holds, stops its goroutines and
// waits for them, and makes later calls return ErrClosed. Waiting calls
// return at once. Calling Close again returns ErrClosed.
func (l *Locker) Close() error {
	hs, ok := l.tables.Close()
	if !ok {
		return dlock.ErrClosed
	}
	l.cancel()
	l.tables.Wait()
	err := driver.ReleaseAll(hs, func(ctx context.Context, h *hold) error { return h.release(ctx, driver.ErrReleasedByClose) })
	l.wd.Stop()
	l.ln.stop()
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// spawn runs f on a goroutine that Close waits for, and returns true; once
// Close is waiting for them, or done, it starts nothing and returns
// false.
func (l *Locker) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.wg.Go(f)
	return true
}

// cleanUp runs f, a clean-up that must happen (a row to give back), on a
// goroutine that Close waits for, or at once once Close is waiting.
func (l *Locker) cleanUp(f func()) {
	if !l.spawn(f) {
		f()
	}
}

// waiterID returns a new name for one waiting call of this Locker.
func (l *Locker) waiterID() string {
	return l.id + "." + strconv.FormatUint(l.seq.Add(1), 36)
}
