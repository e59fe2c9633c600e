package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// A system is one way of locking that the program measures: the floor, a
// peer library, or dlock with some options. Every comparison runs each
// system on the same server with the same client options.
type system interface {
	// name labels the system in tables and charts.
	name() string
	// party connects one party to the server with its own client (its own
	// connections), built from e. Every round trip it makes is counted in
	// rtt: by a go-redis hook, by a gRPC interceptor for etcd, or on the
	// wire for rueidis.
	party(e endpoint, rtt *counter) (party, error)
}

// A party is one client of the lock service: a process, in real life.
type party interface {
	// lock acquires key. When wait is false it makes one attempt (a busy
	// key is an error); when it is true it waits the way the library waits
	// by default, until ctx ends.
	lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error)
	// close releases the party's connections and background work.
	close() error
}

// A held lock.
type held interface {
	unlock(ctx context.Context) error
	// keepAlive keeps the lock alive until unlock, the way the library's
	// documentation tells its users to: the peers with a goroutine per lock
	// whose ticker calls Refresh/Extend every ttl/3, dlock with its
	// built-in watchdog (nothing to start).
	keepAlive(ttl time.Duration)
	// lost reports whether the library told the holder that the lock was
	// lost (a failed renewal, or dlock's Done closed without an unlock).
	lost() bool
	// redisKey and value are what the server should hold for this lock.
	redisKey() string
	value() string
}

// counter is a go-redis hook that counts round trips (one per command sent
// on its own, one per pipeline) and the commands sent. Pub/sub connections
// bypass hooks: their SUBSCRIBE commands are counted on the server.
type counter struct{ n, cmds atomic.Int64 }

func (c *counter) reset() { c.n.Store(0); c.cmds.Store(0) }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// newUniversal returns a client of e's Redis: a Cluster client, whose
// every node client counts its round trips in rtt, when e names a Cluster;
// else a client of the one server.
// withContextTimeout is e with ContextTimeoutEnabled in its clients'
// options.
func (e endpoint) withContextTimeout() endpoint {
	if e.redis != nil {
		o := *e.redis
		o.ContextTimeoutEnabled = true
		e.redis = &o
	}
	if e.cluster != nil {
		o := *e.cluster
		o.ContextTimeoutEnabled = true
		e.cluster = &o
	}
	return e
}

func newUniversal(e endpoint, rtt *counter) redis.UniversalClient {
	if e.cluster == nil {
		return newClient(e.redis, rtt)
	}
	o := *e.cluster
	o.NewClient = func(opts *redis.Options) *redis.Client { return newClient(opts, rtt) }
	return redis.NewClusterClient(&o)
}

func newClient(opts *redis.Options, rtt *counter) *redis.Client {
	c := redis.NewClient(opts)
	if rtt != nil {
		c.AddHook(rtt)
	}
	return c
}

// keeper renews one lock from a goroutine of its own with a ticker at
// ttl/3, as the peers' documentation shows. When the server says the lock
// is gone, the lock is lost; an error (a timeout, say) is retried at the
// next tick until the lease since the last renewal has run out.
type keeper struct {
	stop   chan struct{}
	done   chan struct{}
	failed atomic.Bool
	once   sync.Once
}

func (k *keeper) start(ttl time.Duration, refresh func(ctx context.Context) error) {
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(k.done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
				sent := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
				err := refresh(ctx)
				cancel()
				switch {
				case err == nil:
					last = sent
				case errors.Is(err, errNotHeld) || time.Since(last) >= ttl:
					k.failed.Store(true)
					return
				}
			}
		}
	}()
}

func (k *keeper) halt() {
	if k.stop == nil {
		return
	}
	k.once.Do(func() { close(k.stop) })
	<-k.done
}

// ---------------------------------------------------------------- floor

// releaseSrc is the compare-and-delete of the single-instance algorithm.
const releaseSrc = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

var (
	errBusy    = errors.New("bench: lock busy")
	errNotHeld = errors.New("bench: lock not held")
)

// floor is the least a correct lock can do: SET NX PX with a random token,
// and an EVALSHA compare-and-delete, on raw go-redis. It does not wait
// (wait=true polls every millisecond) and does not renew.
type floor struct{}

func (floor) name() string { return "floor" }

func (floor) party(e endpoint, rtt *counter) (party, error) {
	c := newUniversal(e, rtt)
	return &floorParty{c: c, closeFn: c.Close, release: redis.NewScript(releaseSrc)}, nil
}

type floorParty struct {
	c       floorClient
	closeFn func() error
	release *redis.Script
}

// floorClient is what the floor needs of go-redis: a plain client or an
// AutoPipeliner.
type floorClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

func (p *floorParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var b [16]byte
	rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	for {
		ok, err := p.c.SetNX(ctx, key, tok, ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return &floorLock{p: p, key: key, tok: tok}, nil
		}
		if !wait {
			return nil, errBusy
		}
		if err := pause(ctx); err != nil {
			return nil, err
		}
	}
}

func (p *floorParty) close() error { return p.closeFn() }

type floorLock struct {
	p        *floorParty
	key, tok string
}

func (l *floorLock) unlock(ctx context.Context) error {
	n, err := l.p.release.Run(ctx, l.p.c, []string{l.key}, l.tok).Int()
	if err == nil && n != 1 {
		err = errBusy
	}
	return err
}
func (l *floorLock) keepAlive(time.Duration) {}
func (l *floorLock) lost() bool              { return false }
func (l *floorLock) redisKey() string        { return l.key }
func (l *floorLock) value() string           { return l.tok }

// ---------------------------------------------------------------- bsm

// bsmSys is github.com/bsm/redislock. Waiting uses a linear retry at
// interval; without waiting it makes one attempt (the library's default).
type bsmSys struct {
	interval time.Duration
}

func (s bsmSys) name() string {
	if s.interval == 0 {
		return "bsm/redislock"
	}
	return "bsm/redislock " + fmtDur(s.interval)
}

func (s bsmSys) party(e endpoint, rtt *counter) (party, error) {
	c := newUniversal(e, rtt)
	return &bsmParty{s: s, c: c, lc: bsm.New(c)}, nil
}

type bsmParty struct {
	s  bsmSys
	c  redis.UniversalClient
	lc *bsm.Client
}

func (p *bsmParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var o *bsm.Options
	if wait {
		o = &bsm.Options{RetryStrategy: bsm.LinearBackoff(p.s.interval)}
	}
	l, err := p.lc.Obtain(ctx, key, ttl, o)
	if err != nil {
		return nil, err
	}
	return &bsmLock{l: l}, nil
}

func (p *bsmParty) close() error { return p.c.Close() }

type bsmLock struct {
	l *bsm.Lock
	k keeper
}

func (l *bsmLock) unlock(ctx context.Context) error {
	l.k.halt()
	return l.l.Release(ctx)
}
func (l *bsmLock) keepAlive(ttl time.Duration) {
	l.k.start(ttl, func(ctx context.Context) error {
		err := l.l.Refresh(ctx, ttl, nil)
		if errors.Is(err, bsm.ErrNotObtained) {
			err = errNotHeld
		}
		return err
	})
}
func (l *bsmLock) lost() bool       { return l.k.failed.Load() }
func (l *bsmLock) redisKey() string { return l.l.Key() }
func (l *bsmLock) value() string    { return l.l.Token() + l.l.Metadata() }

// ---------------------------------------------------------------- redsync

// redsyncSys is github.com/go-redsync/redsync/v4 over its go-redis v9 pool,
// with its defaults (32 tries, 50–250 ms random delay). One Mutex per
// acquisition, as its documentation does.
type redsyncSys struct{}

func (redsyncSys) name() string { return "redsync" }

func (redsyncSys) party(e endpoint, rtt *counter) (party, error) {
	c := newUniversal(e, rtt)
	return &redsyncParty{c: c, rs: redsync.New(goredis.NewPool(c))}, nil
}

type redsyncParty struct {
	c  redis.UniversalClient
	rs *redsync.Redsync
}

func (p *redsyncParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	m := p.rs.NewMutex(key, redsync.WithExpiry(ttl))
	var err error
	if wait {
		// LockContext gives up after its tries; a caller that must have
		// the lock calls it again.
		for {
			if err = m.LockContext(ctx); err == nil || ctx.Err() != nil {
				break
			}
		}
	} else {
		err = m.TryLockContext(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &redsyncLock{m: m}, nil
}

func (p *redsyncParty) close() error { return p.c.Close() }

type redsyncLock struct {
	m *redsync.Mutex
	k keeper
}

func (l *redsyncLock) unlock(ctx context.Context) error {
	l.k.halt()
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errBusy
	}
	return err
}
func (l *redsyncLock) keepAlive(ttl time.Duration) {
	l.k.start(ttl, func(ctx context.Context) error {
		ok, err := l.m.ExtendContext(ctx)
		var taken *redsync.ErrTaken
		if (err == nil && !ok) || errors.As(err, &taken) {
			err = errNotHeld
		}
		return err
	})
}
func (l *redsyncLock) lost() bool       { return l.k.failed.Load() }
func (l *redsyncLock) redisKey() string { return l.m.Name() }
func (l *redsyncLock) value() string    { return l.m.Value() }

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second && d%time.Second == 0:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d >= time.Millisecond && d%time.Millisecond == 0:
		return strconv.Itoa(int(d/time.Millisecond)) + "ms"
	default:
		return fmt.Sprint(d)
	}
}

// pause waits the floor's millisecond between attempts, or until ctx ends.
func pause(ctx context.Context) error {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
