package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// dlockSystems returns dlock's variants measured in part p.
func dlockSystems(p int) []system {
	switch p {
	case partUncontended:
		return []system{dlockSys{}, dlockSys{fenced: true}, dlockSys{lease: true}, dlockSys{fair: true}, dlockSys{bounded: true}}
	case partHot:
		return []system{dlockSys{}, dlockSys{fenced: true}, dlockSys{fair: true}, dlockSys{poll: true}}
	default:
		return []system{dlockSys{}}
	}
}

// dlockSys is dlock's Redis driver with default options (watchdog on,
// waiters woken on release, no fencing token), or with a fencing token on
// every acquisition (fenced: all three on), with the watchdog off (lease:
// the TTL is pinned), in fair mode, with wake-on-release off (poll:
// waiters poll at the default retry interval, 100ms), or on a client with
// ContextTimeoutEnabled (bounded: the client stops reading at the
// context's deadline, so the Locker sends a lone request from its
// caller's goroutine; on a default client a request goes through a
// worker, so that its caller returns at RequestTimeout whatever the
// client's read timeout).
type dlockSys struct {
	fenced, lease, fair, poll, bounded bool
}

func (s dlockSys) name() string {
	switch {
	case s.fenced:
		return "dlock fenced"
	case s.lease:
		return "dlock lease (no watchdog)"
	case s.fair:
		return "dlock fair"
	case s.poll:
		return "dlock notify off " + fmtDur(dlock.DefaultRetryInterval)
	case s.bounded:
		return "dlock, client ContextTimeoutEnabled"
	}
	return "dlock"
}

func (s dlockSys) party(e endpoint, rtt *counter) (party, error) {
	if s.bounded {
		e = e.withContextTimeout()
	}
	c := newUniversal(e, rtt)
	l, err := redislock.New(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &dlockParty{s: s, c: c, l: l}, nil
}

type dlockParty struct {
	s dlockSys
	c redis.UniversalClient
	l *redislock.Locker

	// The options of the calls, built once per TTL: none at all for the
	// defaults.
	opts atomic.Pointer[callOpts]
}

type callOpts struct {
	ttl  time.Duration
	opts []dlock.Option
}

func (p *dlockParty) options(ttl time.Duration) []dlock.Option {
	if c := p.opts.Load(); c != nil && c.ttl == ttl {
		return c.opts
	}
	var o []dlock.Option
	switch {
	case p.s.lease:
		o = append(o, dlock.WithLease(ttl))
	case ttl != dlock.DefaultTTL:
		o = append(o, dlock.WithTTL(ttl))
	}
	if p.s.fenced {
		o = append(o, dlock.WithFencing(true))
	}
	if p.s.fair {
		o = append(o, dlock.WithFair(true))
	}
	if p.s.poll {
		o = append(o, dlock.WithNotify(false))
	}
	p.opts.Store(&callOpts{ttl: ttl, opts: o})
	return o
}

func (p *dlockParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var (
		lk  dlock.Lock
		err error
	)
	if wait {
		lk, err = p.l.Lock(ctx, key, p.options(ttl)...)
	} else {
		lk, err = p.l.TryLock(ctx, key, p.options(ttl)...)
	}
	if err != nil {
		return nil, err
	}
	return &dlockLock{lk: lk}, nil
}

func (p *dlockParty) close() error {
	return errors.Join(p.l.Close(), p.c.Close())
}

type dlockLock struct{ lk dlock.Lock }

func (l *dlockLock) unlock(ctx context.Context) error { return l.lk.Unlock(ctx) }

// keepAlive does nothing: the watchdog renews every lock taken with the
// default options.
func (l *dlockLock) keepAlive(time.Duration) {}

func (l *dlockLock) lost() bool {
	select {
	case <-l.lk.Done():
		return true // not released yet, so it was lost
	default:
		return false
	}
}
func (l *dlockLock) redisKey() string { return dlock.DefaultPrefix + ":lock:" + l.lk.Key() }
func (l *dlockLock) value() string    { return l.lk.Token() }
