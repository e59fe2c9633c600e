package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/rediswait"
	"github.com/redis/go-redis/v9"
)

// DefaultNodeTimeout bounds each request to one node of a Locker made
// without WithNodeTimeout: much less than any useful lease, so that a node
// that does not answer costs an acquisition little of its validity.
const DefaultNodeTimeout = 100 * time.Millisecond

// Locker is the Redlock implementation of dlock.Locker: a lock is held
// when a majority of N independent Redis masters granted it within its
// validity. It is also a dlock.RWLocker, a driver.Watcher and a
// dlock.Inspector, and its locks are driver.Lapsers; it is no
// dlock.Semaphore (see the package doc). Create it with New;
// it is safe for concurrent use. It owns the watchdog's two goroutines,
// one subscription goroutine per node while it has waiters or watches,
// one goroutine per Watch, and the goroutines of requests in flight;
// Close stops them all.
type Locker struct {
	nodes   []*node
	quorum  int
	timeout time.Duration
	opts    dlock.Options
	log     *slog.Logger

	quit     chan struct{}        // closed by Close: waiters stop waiting
	tables   driver.Tables[*hold] // locks, and read and write holds (see rwlock.go)
	watchdog driver.Watchdog[*hold]
	notify   *rediswait.Subscriber
	sub      string    // the subscriber id: its waiters are woken on "<queue key>:<sub>"
	waiters  sync.Pool // of *waiter: a waiting Lock's state, reused once its wait returned

	calls calls          // calls in flight that no table counts
	bg    sync.WaitGroup // requests in flight, and their cleanups

	testHook func() // called by fanout before it sends a round; nil but in tests
}

var (
	_ dlock.Locker    = (*Locker)(nil)
	_ dlock.Inspector = (*Locker)(nil)
	_ dlock.RWLocker  = (*Locker)(nil)
)

// New returns a Locker over the masters that clients talk to, one client
// each: independent servers (no replication between them, no Cluster),
// usually 3 or 5. A lock is held when a majority of them granted it. opts
// become the defaults of every call; WithPrefix, WithLogger and this
// driver's own [WithNodeTimeout] apply here only.
func New(clients []redis.UniversalClient, opts ...dlock.Option) (*Locker, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: redlock needs at least one client", dlock.ErrNilClient)
	}
	for _, c := range clients {
		if v := reflect.ValueOf(c); c == nil || v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, dlock.ErrNilClient
		}
	}
	o, err := driver.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if err := redisnode.CheckPrefix(o.Prefix); err != nil {
		return nil, err
	}
	own, err := driver.Own[settings](o)
	if err != nil {
		return nil, err
	}
	o.Driver = own // a call's option of another driver is refused
	l := &Locker{
		quorum:  len(clients)/2 + 1,
		timeout: cmp.Or(own.nodeTimeout, DefaultNodeTimeout),
		opts:    o,
		log:     o.Logger.With("driver", "redlock"),
		quit:    make(chan struct{}),
		sub:     driver.NewToken()[:8],
	}
	for i, c := range clients {
		addr := fmt.Sprint(i)
		if rc, ok := c.(*redis.Client); ok {
			addr = rc.Options().Addr
		}
		l.nodes = append(l.nodes, &node{i: i, client: c, send: sender(c), addr: addr})
	}
	l.tables.Init("redlock", o, l.unwatch)
	if err := l.watchdog.Init(driver.WatchdogConfig[*hold]{
		Drift:  redisnode.Drift,
		Renew:  l.renew,
		Lost:   func(lk *hold, cause error) { lk.lose(cause) },
		Lapsed: func(lk *hold) { lk.end(dlock.ErrNotHeld) },
		Renewed: func(lk *hold, err error) {
			if t := lk.table(); t.Observed() {
				t.Renewed(lk, err)
			}
		},
		OnFailure: func(n int, err error) {
			l.log.Warn("renewal failed", "locks", n, "error", err)
		},
	}); err != nil {
		return nil, err
	}
	l.notify = newSubscriber(l)
	l.waiters.New = func() any { return new(waiter) }
	return l, nil
}

// Quorum is the number of nodes that must grant a lock: a majority.
func (l *Locker) Quorum() int { return l.quorum }

// TryLock makes one attempt to acquire key: one request to every node at
// once. It succeeds when a majority of them granted the lock and the
// lease's validity (TTL less the time the majority took to answer, less
// the drift margin) is left; otherwise it releases what it took, on every
// node at once. When the lock is busy the error matches
// dlock.ErrNotAcquired and is a *dlock.NotAcquiredError; when too few
// nodes answered to decide, it matches ErrNoQuorum.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	if !l.calls.enter() {
		return nil, errClosed("", key)
	}
	defer l.calls.leave()
	lk, _, err := l.prepare(ctx, key, opts, false)
	if err != nil {
		return nil, err
	}
	res := l.attempt(ctx, lk, nil)
	if res.err == nil {
		err = l.acquired(ctx, lk)
	} else {
		err = res.err
	}
	if err != nil {
		l.tables.Locks.Remove(lk)
		l.tables.Locks.Failed(lk, false, err)
		return nil, err
	}
	return lk, nil
}

// Unlock releases this Locker's most recent hold on key for the owner in
// ctx (see dlock.Locker). It returns an error matching dlock.ErrNotHeld
// when there is none.
func (l *Locker) Unlock(ctx context.Context, key string) error {
	lk, err := l.tables.Locks.Find(ctx, key)
	if err != nil {
		return err
	}
	return lk.Unlock(ctx)
}

// Close stops waiting calls (they return dlock.ErrClosed), releases every
// lock this Locker still holds, stops its goroutines and waits for them.
// Later calls return dlock.ErrClosed. It returns the errors of the
// releases that failed. It does not close the clients.
func (l *Locker) Close() error {
	all, ok := l.tables.Close()
	if !ok {
		return dlock.ErrClosed
	}
	close(l.quit)
	l.notify.Interrupt()
	err := driver.ReleaseAll(all, func(ctx context.Context, lk *hold) error { return lk.closeRelease(ctx) })
	l.tables.Wait()
	l.watchdog.Stop()
	l.notify.Stop()
	l.calls.close()
	l.bg.Wait()
	return err
}

// prepare validates a call and reserves its place in the table of holds.
// A waiting call (wait) must call l.tables.Locks.Leave when it returns, if
// prepare did not fail.
func (l *Locker) prepare(ctx context.Context, key string, opts []dlock.Option, wait bool) (*hold, dlock.Options, error) {
	o, k, err := redisnode.Prepare(ctx, l.tables.Locks.Closed(), l.opts, key, opts, nil)
	if err != nil {
		return nil, o, err
	}
	owner := o.OwnerIn(ctx)
	lk := &hold{l: l, keys: k, keyArgs: k.Args(), scripts: lockScripts, ttl: o.TTL, renew: o.AutoRenew}
	lk.Init(driver.HoldLock, key, owner, o.Owner != "")
	lk.SetToken(driver.NewToken())
	if err := l.tables.Locks.Reserve(lk, wait); err != nil {
		return nil, o, err
	}
	l.tables.Locks.Begin(ctx, lk)
	return lk, o, nil
}

// acquired records a lock that is now held and starts watching its lease.
// A lock that arrives after Close began is given back.
func (l *Locker) acquired(ctx context.Context, lk *hold) error {
	if err := lk.table().Add(lk); err != nil {
		l.giveBack(ctx, lk, l.nodes, nil)
		return err
	}
	l.watchdog.AddUntil(lk, lk.deadline, lk.ttl, lk.renew)
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("acquired", "key", lk.Key(), "fence", lk.Fence(), "ttl", lk.ttl)
	}
	return nil
}

// nodeTimeout is the bound of one request to one node for a lease of ttl.
func (l *Locker) nodeTimeout(ttl time.Duration) time.Duration {
	return min(l.timeout, ttl/2)
}

// queueing is the state of a waiting attempt: the waiter's place (its
// score, the same on every node) and its entry.
type queueing struct {
	score   int64         // when the waiter began to wait, in µs
	claim   time.Duration // how long its entry stays valid after this attempt
	attempt int64         // the attempt's number
	// How far the waiter's place may stretch its entry's claim window:
	// at most maxStretch - 1 steps (see rediswait.MaxStretch).
	maxStretch int64
	step       time.Duration
}

// result is the outcome of one attempt.
type result struct {
	err        error         // nil: the lock is ours (lk.fence and lk.deadline set)
	busy       bool          // the lock is held by another party
	retryAfter time.Duration // the holder's remaining lease, as the busy nodes said
	stretch    []int64       // by node: the stretch a busy node gave the waiter's entry (0: no such reply)
	round      *round        // the attempt's round, whose slowest nodes may still answer; nil when it took the lock
}

// attempt makes one attempt on every node at once (see TryLock); q, when
// not nil, makes it a waiter's: a node where a live waiter comes first
// queues the caller instead, and a failed attempt gives back what it
// took but keeps the caller queued there.
func (l *Locker) attempt(ctx context.Context, lk *hold, q *queueing) result {
	lk.table().Attempted(lk)
	if q != nil {
		c := *q // late replies use it after the caller moved on
		q = &c
	}
	ttl := lk.ttl
	args := []any{lk.Token(), ttl.Milliseconds(), lk.Owner(), "0", 0, 0, 0, l.sub, time.Now().UnixMicro()}
	if q != nil {
		args[3], args[4], args[5], args[6] = "1", q.score, q.claim.Milliseconds(), q.attempt
	}
	if lk.Kind() != driver.HoldLock {
		args = append(args, lk.Kind().Letter())
	} else if q != nil {
		args = append(args, q.maxStretch, q.step.Milliseconds())
	}
	q2 := l.quorum
	n := len(l.nodes)
	send := func(ctx context.Context, nd *node) reply {
		v, err := lk.scripts.acquire.Run(ctx, nd.send, lk.keyArgs, args...).Int64()
		return reply{n: v, err: err}
	}
	enough := func(got []reply) bool {
		won, lost := 0, 0
		for _, r := range got {
			if r.err == nil && r.n >= 0 {
				won++
			} else {
				lost++
			}
		}
		return won >= q2 || lost > n-q2
	}
	cleanup := func(r reply) {
		if r.err == nil && r.n >= 0 || !r.definite() {
			l.giveBack(ctx, lk, []*node{l.nodes[r.node]}, q)
		}
	}
	sent := time.Now()
	got, rd := l.fanout(ctx, l.nodes, l.nodeTimeout(ttl), send, enough, cleanup)
	var (
		won       []reply
		busy      []time.Duration
		stretch   = make([]int64, n)
		errs      []error
		uncertain []*node // no reply: the request may have taken the lock
		upgrade   bool    // a node says that the owner holds a read lock
	)
	for _, r := range got {
		switch {
		case r.err == nil && r.n >= 0:
			won = append(won, r)
		case r.err == nil:
			lease, k := rediswait.Busy(r.n)
			busy, stretch[r.node] = append(busy, lease), k
		case redis.HasErrorPrefix(r.err, "DLOCK_UPGRADE"):
			upgrade = true
		default:
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
			if !r.definite() {
				uncertain = append(uncertain, l.nodes[r.node])
			}
		}
	}
	lk.deadline = redisnode.Drift.Deadline(sent, ttl)
	if len(won) >= q2 && time.Now().Before(lk.deadline) {
		rd.settle(false)
		lk.acquiring, lk.answered = rd, make([]bool, n)
		for _, r := range got {
			lk.answered[r.node] = r.definite()
		}
		fences := make(map[int]uint64, len(won))
		for _, r := range won {
			fences[r.node] = uint64(r.n)
		}
		if err := l.fence(ctx, lk, fences); err != nil {
			l.giveBack(ctx, lk, l.nodes, q)
			return result{err: err}
		}
		return result{}
	}
	rd.settle(true)
	var back []*node
	for _, r := range won {
		back = append(back, l.nodes[r.node])
	}
	l.giveBack(ctx, lk, back, q)
	if len(uncertain) > 0 { // nodes that did not answer are not waited for
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			l.giveBack(ctx, lk, uncertain, q)
		}()
	}
	if upgrade {
		return result{err: lk.Wrap("lock", dlock.ErrUpgrade)}
	}
	if err := ctx.Err(); err != nil {
		return result{err: &dlock.NotAcquiredError{Key: lk.Key(), Err: err}, busy: true}
	}
	if len(won)+len(busy) < q2 || len(busy) == 0 {
		if len(won) >= q2 {
			errs = append(errs, fmt.Errorf("the majority answered after the lease's validity (%v) ran out", ttl-redisnode.Drift.Of(ttl)))
		}
		if len(got) < len(l.nodes) {
			errs = append(errs, fmt.Errorf("%d nodes did not answer within %v", len(l.nodes)-len(got), l.nodeTimeout(ttl)))
		}
		return result{err: l.noQuorum("lock", lk.Key(), len(won)+len(busy), errs)}
	}
	slices.Sort(busy)
	return result{err: &dlock.NotAcquiredError{Key: lk.Key(), RetryAfter: busy[0]}, busy: true, retryAfter: busy[0], stretch: stretch, round: rd}
}

// noQuorum is the error of a call that too few nodes answered.
func (l *Locker) noQuorum(op, key string, answered int, errs []error) error {
	err := fmt.Errorf("%w: %d of %d nodes answered, %d needed", ErrNoQuorum, answered, len(l.nodes), l.quorum)
	if len(errs) > 0 {
		err = fmt.Errorf("%w: %w", err, errors.Join(errs...))
	}
	return driver.Wrap(op, key, err)
}

// giveBackTimeout bounds a give-back: what it could not undo expires with
// its lease.
const giveBackTimeout = time.Second

// giveBack releases, on nodes, whatever an attempt of lk may hold there,
// on all of them at once, and waits for the answers (each bounded by
// giveBackTimeout), so that a later give-back of the same waiter cannot
// overtake it. A waiter's (q not nil) stays queued; otherwise the caller
// leaves the queues.
func (l *Locker) giveBack(ctx context.Context, lk *hold, nodes []*node, q *queueing) {
	if len(nodes) == 0 {
		return
	}
	args := []any{lk.Token(), lk.Owner(), releaseGiveUp, 0, 0, 0, "", time.Now().UnixMicro()}
	if q != nil {
		args = []any{lk.Token(), lk.Owner(), releaseRequeue, q.score, q.claim.Milliseconds(), q.attempt, l.sub, time.Now().UnixMicro()}
	}
	if lk.Kind() != driver.HoldLock {
		args = append(args, lk.Kind().Letter())
	} else if q != nil {
		args = append(args, q.maxStretch, q.step.Milliseconds())
	}
	var wg sync.WaitGroup
	for _, nd := range nodes {
		l.bg.Add(1)
		wg.Go(func() {
			defer l.bg.Done()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
			defer cancel()
			lk.scripts.release.Run(rctx, nd.send, lk.keyArgs, args...)
		})
	}
	wg.Wait()
}

// unwatch stops the watchdog's watch of a hold that ended.
func (l *Locker) unwatch(lk *hold) { l.watchdog.Remove(lk) }
