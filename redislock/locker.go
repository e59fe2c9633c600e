package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/rediswait"
	"github.com/redis/go-redis/v9"
)

// Locker is the Redis implementation of dlock.Locker. Create it with New;
// it is safe for concurrent use. Its goroutines start when first needed
// and stop at Close: the watchdog's scheduler and renewer, the subscriber
// that wakes waiters, and the workers that send acquisitions' requests
// (one per request under way, or per pipeline of them under load), which
// end 10s after their last (see RequestTimeout); Close waits for the requests whose callers stopped
// waiting, and their give-backs. With a *redis.Client whose
// ContextTimeoutEnabled is set, a lone attempt whose context has no Done
// (context.Background, say) is sent on its caller's goroutine, which
// halves the client's CPU of an uncontended cycle: give the client that
// option.
type Locker struct {
	client redis.UniversalClient
	send   redisnode.Processor // the client, or a coalescer in front of it
	opts   dlock.Options
	log    *slog.Logger

	quit   chan struct{}        // closed by Close: waiters stop waiting
	tables driver.Tables[*hold] // this Locker's holds, and the calls under way

	ttlArg any // the default TTL in ms, boxed once

	reqs      sender // runs acquisitions' requests, so that their callers wait no longer than their bound
	watchdog  driver.Watchdog[*hold]
	oneServer bool // the client talks to one server: a renewal batch is one script call
	renewBufs renewBuffers
	notify    *rediswait.Subscriber
	sub       string    // the subscriber id: its waiters are woken on "<queue key>:<sub>"
	waiters   sync.Pool // of *waiter: a waiting Lock's state, reused once its wait returned

	hookAcquired func() // tests only: runs when an acquisition is about to be recorded
}

var (
	_ dlock.Locker    = (*Locker)(nil)
	_ dlock.Inspector = (*Locker)(nil)
)

// New returns a Locker over client: a *redis.Client, a failover
// (Sentinel) client, or a *redis.ClusterClient. opts become the defaults of
// every call; WithPrefix and WithLogger apply here only. A prefix may not
// contain braces (see the key layout in the package doc).
func New(client redis.UniversalClient, opts ...dlock.Option) (*Locker, error) {
	if v := reflect.ValueOf(client); client == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, dlock.ErrNilClient // nil, or a nil *redis.Client in the interface
	}
	o, err := driver.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if err := redisnode.CheckPrefix(o.Prefix); err != nil {
		return nil, err
	}
	if err := checkAck(client, o); err != nil {
		return nil, err
	}
	l := &Locker{
		client: client,
		send:   newProcessor(client),
		opts:   o,
		log:    o.Logger,
		quit:   make(chan struct{}),
		ttlArg: o.TTL.Milliseconds(),
	}
	l.tables.Init(backend, o, l.unwatch)
	if err := l.newWatchdog(); err != nil {
		return nil, err
	}
	co, _ := l.send.(*redisnode.Coalescer)
	l.reqs.init(co, directOf(client, l.send))
	l.notify = newSubscriber(client, l)
	l.sub = driver.NewToken()[:8]
	l.waiters.New = func() any { return new(waiter) }
	return l, nil
}

// directOf is the coalescer p in front of client when the client bounds
// a command by its context's deadline: the sender may then send a lone
// attempt on its caller's goroutine (see sender). Else nil.
func directOf(client redis.UniversalClient, p redisnode.Processor) *redisnode.Coalescer {
	c, ok := client.(*redis.Client)
	co, isCo := p.(*redisnode.Coalescer)
	if !ok || !isCo || !c.Options().ContextTimeoutEnabled {
		return nil
	}
	return co
}

// TryLock makes one attempt to acquire key: one round trip to Redis (two
// when a bare SET finds the lock busy, see below). Unless
// the call is fenced, fair or has an owner, the attempt is the bare
// SET key token NX PX ttl of the single-instance algorithm; when it finds
// the lock busy, a GET asks whether the token there is its own (a SET the
// client re-sent after its first run set the key). When the lock
// is busy the error matches dlock.ErrNotAcquired and is a
// *dlock.NotAcquiredError; its RetryAfter is the holder's remaining lease
// when the attempt ran a script (a bare SET does not ask).
func (l *Locker) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, o, err := l.prepare(ctx, key, opts, false)
	if err != nil {
		return nil, err
	}
	if err := l.try(ctx, lk, o); err != nil {
		l.tables.Locks.Remove(lk)
		l.tables.Locks.Failed(lk, false, err)
		return nil, err
	}
	return lk, nil
}

// try makes TryLock's one attempt for lk, and records the hold when it
// got it; a busy lock is a *dlock.NotAcquiredError.
func (l *Locker) try(ctx context.Context, lk *hold, o dlock.Options) error {
	mode := modeTry
	if o.Fair {
		mode = modeFair
	}
	held, retryAfter, err := l.attempt(ctx, lk, mode, 0, 0, nil)
	if err == nil && !held {
		err = &dlock.NotAcquiredError{Key: lk.Key(), RetryAfter: retryAfter}
	}
	if err == nil {
		_, err = l.acquired(ctx, lk)
	}
	return err
}

// Unlock releases this Locker's most recent hold on key for the owner in
// ctx. When ctx carries no owner, it releases the hold without owner, or
// else the most recent hold made with dlock.WithOwner (a key has one
// owner at a time); a hold whose owner came in a context is released only
// with that owner in ctx. It returns an error matching dlock.ErrNotHeld
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
// releases that failed.
func (l *Locker) Close() error { return l.close(true) }

// Orphan is Close without the releases: the locks still held stay in Redis
// until their leases run out, and their handles report them lost. Use it
// when the process hands its work to a successor that must not start before
// the leases end.
func (l *Locker) Orphan() error { return l.close(false) }

func (l *Locker) close(release bool) error {
	// Every acquisition is either collected here or told by the table
	// that the Locker closed, and gives back.
	all, ok := l.tables.Close()
	if !ok {
		return dlock.ErrClosed
	}
	close(l.quit)
	l.notify.Interrupt()
	var err error
	if release {
		err = driver.ReleaseAll(all, func(ctx context.Context, lk *hold) error { return lk.closeRelease(ctx) })
	} else {
		for _, lk := range all {
			lk.lose(fmt.Errorf("%w: the Locker was orphaned", dlock.ErrOwnershipLost))
		}
	}
	l.tables.Wait() // the waiters leave their queues before the client may close
	l.watchdog.Stop()
	l.notify.Stop()
	l.reqs.close() // and the requests their callers left, with their give-backs
	return err
}

// prepare validates a call and reserves its place in the table of holds
// (see driver.Table.Reserve). A waiting call (wait) must call
// l.tables.Locks.Leave when it returns, if prepare did not fail.
func (l *Locker) prepare(ctx context.Context, key string, opts []dlock.Option, wait bool) (*hold, dlock.Options, error) {
	check := func(o dlock.Options) error { return checkAck(l.client, o) }
	o, k, err := redisnode.Prepare(ctx, l.tables.Locks.Closed(), l.opts, key, opts, check)
	if err != nil {
		return nil, o, err
	}
	lk := l.newLock(driver.HoldLock, key, k, driver.NewToken(), o.OwnerIn(ctx), o.Owner != "", o.TTL)
	lk.renew, lk.fenced = o.AutoRenew, o.Fencing
	lk.ack = ackOf(o)
	if err := l.tables.Locks.Reserve(lk, wait); err != nil {
		return nil, o, err
	}
	l.tables.Locks.Begin(ctx, lk)
	return lk, o, nil
}

func (l *Locker) newLock(hk driver.HoldKind, key string, k redisnode.Keys, token, owner string, byOption bool, ttl time.Duration) *hold {
	lk := &hold{l: l, keys: k, owner: owner, ttl: ttl}
	lk.Init(hk, key, owner, byOption)
	lk.SetToken(token)
	// Pointers into lk, which go-redis writes as the strings they point
	// to: boxing them allocates nothing, where boxing a string would.
	for i, s := range lk.keys.Ptrs() {
		lk.keyArgs[i] = s
	}
	lk.tokenArg, lk.ownerArg = lk.TokenRef(), &lk.owner
	return lk
}

// acquired records a lock that is now held and starts watching its lease.
// A lock that arrives after Close began is given back (see
// driver.Table.Add).
func (l *Locker) acquired(ctx context.Context, lk *hold) (*hold, error) {
	if l.hookAcquired != nil {
		l.hookAcquired()
	}
	if err := lk.table().Add(lk); err != nil {
		l.giveBack(ctx, lk, time.Now().Add(giveBackTimeout))
		return nil, err
	}
	// The first renewal falls due when a third of what is left of the
	// lease has passed: a third of the TTL for a lock just taken, sooner
	// for a waiter's grant, which lasts only its claim window.
	l.watchdog.AddUntil(lk, lk.deadline, lk.ttl, lk.renew)
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "acquired", "key", lk.Key(), "fence", lk.Fence(), "ttl", lk.ttl)
	}
	return lk, nil
}

// attempt makes one attempt: a bare SET NX PX for a plain try, else
// try.lua (a fenced plain try) or acquire.lua. It reports whether the lock
// is ours (and then sets lk.fence), or the holder's remaining lease when
// the attempt could ask (zero otherwise). The lease deadline of a lock it
// takes counts from the moment before the command was sent. n numbers the
// waiter's attempts that join the queue (0 for the others); q, when not
// nil, is the waiter's part of its queue entry, and gets the stretch the
// script gave it. With replica
// acknowledgement (see WithReplicaAck), a lock taken but not acknowledged
// is given back, and the attempt fails with ErrNotReplicated.
func (l *Locker) attempt(ctx context.Context, lk *hold, mode attemptMode, claim time.Duration, n int64, q *queueing) (held bool, retryAfter time.Duration, err error) {
	if lk.Kind() != driver.HoldLock {
		return l.attemptHold(ctx, lk, mode, claim, n)
	}
	l.tables.Locks.Attempted(lk)
	sent := time.Now()
	deadline := sent.Add(lk.requestTimeout())
	ttl := l.ttlArg
	if lk.ttl != l.opts.TTL {
		ttl = lk.ttl.Milliseconds()
	}
	p, ack := l.send, (*acker)(nil)
	if lk.ack.n > 0 {
		ack = &acker{client: l.client, ack: lk.ack}
		p = ack
	}
	var r int64
	switch bare := mode&^modeRetried == modeTry && lk.Owner() == ""; {
	case bare && !lk.fenced && ack == nil:
		var busy bool
		if busy, err = l.set(ctx, deadline, p, lk, ttl, mode&modeRetried == 0); err == nil && busy {
			return false, 0, nil
		}
	case bare && !lk.fenced:
		// SET NX GET answers nil when it set, else the current value: our
		// own token when this is a re-sent attempt whose first run set it.
		// (With replica acknowledgement: the WAIT that follows a SET
		// counts the replicas that have it.)
		set := redis.NewStringCmd(ctx, "set", lk.keyArgs[0], lk.tokenArg, "px", ttl, "nx", "get")
		switch err = l.process(ctx, deadline, p, set, lk); {
		case err == redis.Nil:
			err = nil
		case err == nil && set.Val() != lk.Token():
			return false, 0, nil
		}
	case bare:
		r, err = l.run(ctx, deadline, p, tryScript, lk.keyArgs[:2], []any{lk.tokenArg, ttl}, lk).Int64()
	default:
		fenced := "0"
		if lk.fenced {
			fenced = "1"
		}
		if q == nil {
			q = &queueing{}
		}
		r, err = l.run(ctx, deadline, p, acquireScript, lk.keyArgs[:], []any{lk.tokenArg, ttl, lk.ownerArg, int(mode &^ modeRetried), claim.Milliseconds(), n, fenced,
			q.sub(l.sub), q.maxStretch, q.step.Milliseconds()}, lk).Int64()
	}
	taken := false // but not where a failover would keep it
	if err == nil && r >= 0 && ack != nil {
		err = ack.check()
		taken = err != nil
	}
	if err != nil {
		return false, 0, l.failed(ctx, lk, mode, deadline, taken, err)
	}
	if r < 0 {
		var stretch int64
		retryAfter, stretch = rediswait.Busy(r)
		if q != nil {
			q.stretch = stretch
		}
		return false, retryAfter, nil
	}
	lk.SetFence(uint64(r))
	lk.setDeadline(sent, lk.ttl)
	return true, 0, nil
}

// set is the bare attempt of lk: SET NX PX, as in the single-instance
// algorithm, whose reply (OK when it set, nil when the lock is busy) is
// read as a bool, which go-redis reads without an error. A SET that
// go-redis re-sent after its first run set the key finds it busy with our
// own token: when check, a busy reply is followed by a GET that asks
// whose token it is (a second round trip, on the busy path only); a
// waiter whose next attempt runs at once, by script, leaves that to the
// script (modeRetried).
func (l *Locker) set(ctx context.Context, deadline time.Time, p redisnode.Processor, lk *hold, ttl any, check bool) (busy bool, err error) {
	set := redis.NewBoolCmd(ctx, "set", lk.keyArgs[0], lk.tokenArg, "px", ttl, "nx")
	if err := l.process(ctx, deadline, p, set, lk); err != nil || set.Val() {
		return false, err
	}
	if !check {
		return true, nil
	}
	get := redis.NewStringCmd(ctx, "get", lk.keyArgs[0])
	switch err := l.process(ctx, deadline, p, get, lk); {
	case err == redis.Nil:
		return true, nil // released since: busy, as the SET found it
	case err != nil:
		return false, err
	default:
		return get.Val() != lk.Token(), nil
	}
}

// failed is the error of an attempt of lk in mode, bounded by deadline,
// that failed with err (taken: it took the lock, which replicas did not
// acknowledge). The reply was lost (a timeout, a cancelled context, a
// broken connection) or never waited for: the attempt may have taken the
// lock. It is given back, as a semaphore gives back a grant that arrives
// after cancellation: by the worker that ends an attempt its caller no
// longer waits for, else here, waited for until deadline at the latest. A
// waiter that gets an error reply leaves the queue it joined earlier: a
// grant to it would block the key.
func (l *Locker) failed(ctx context.Context, lk *hold, mode attemptMode, deadline time.Time, taken bool, err error) error {
	var nr *noReplyError
	if !errors.As(err, &nr) && (taken || !errors.As(err, new(redis.Error)) || mode&modeWait != 0) {
		if gerr := l.giveBack(ctx, lk, deadline); gerr != nil {
			err = errors.Join(err, gerr)
		}
	}
	return lk.Wrap("lock", err)
}

// requestTimeout bounds each request of an acquisition of lk: see
// RequestTimeout.
func (lk *hold) requestTimeout() time.Duration { return RequestTimeout + lk.ack.timeout }

// giveBackTimeout bounds a give-back. It need not wait for the reply of a
// server that does not answer: once written, the release runs after the
// attempt it undoes. It goes straight to the client, not through the
// coalescer, so that it is written at once even when every flush waits on
// that server.
const giveBackTimeout = 500 * time.Millisecond

// giveBack releases whatever an interrupted attempt of lk may hold, and
// takes it out of the wait queue: a request of giveBackTimeout, waited for
// until by at the latest. When it stops waiting first, it returns a
// *noReplyError whose settled channel closes when the give-back ended:
// lk's next attempt must not overtake it.
func (l *Locker) giveBack(ctx context.Context, lk *hold, by time.Time) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	r := l.reqs.get(rctx, l.client)
	r.cancel = cancel
	r.keys = lk.keyArgs[:]
	r.script, r.args = lk.store().release, lk.args(r.argBuf[:0], "1")
	if by.After(time.Now().Add(giveBackTimeout)) {
		by = time.Now().Add(giveBackTimeout)
	}
	if err := l.reqs.send(r, by); err != nil {
		return err
	}
	l.reqs.put(r)
	return nil
}

// giveBackNow is giveBack on the caller's goroutine, waited for until the
// client gives up: what a worker does after an attempt its caller left.
func (l *Locker) giveBackNow(ctx context.Context, lk *hold) {
	rctx, cancel := context.WithTimeout(ctx, giveBackTimeout)
	defer cancel()
	lk.store().release.Run(rctx, l.client, lk.keyArgs[:], lk.args(nil, "1")...)
}

// backend names the driver in the events of dlock.WithObserver.
const backend = "redis"

// unwatch stops the watchdog's watch of a hold that ended.
func (l *Locker) unwatch(lk *hold) { l.watchdog.Remove(lk) }
