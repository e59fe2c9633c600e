package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidisLockSys is github.com/redis/rueidis/rueidislock as its README
// shows it for one Redis server: KeyMajority 1 and NoLoopTracking (Redis
// 7.0.5 or later). A lock is a context: WithContext waits, woken by the
// client-side-caching invalidation of the lock's key; TryWithContext makes
// one attempt; the cancel function releases. The Locker extends each lock
// it holds itself, from a goroutine per lock, every ExtendInterval: set to
// TTL/3 here like the peers' renewals (its default is half the validity).
// TryNextAfter, the time one key's attempt may take before the next key is
// tried, is raised from 20ms to the 5s timeout of every other client: with
// one key there is no next key, and on this loaded machine an attempt can
// take longer than 20ms, which would fail it.
type rueidisLockSys struct{}

func (rueidisLockSys) name() string { return "rueidislock" }

func (rueidisLockSys) party(e endpoint, rtt *counter) (party, error) {
	return &rueidisLockParty{opts: rueidisOptions(e, rtt)}, nil
}

// rueidisLockParty makes its Locker at the first acquisition: a Locker has
// one validity (TTL) for all its locks.
type rueidisLockParty struct {
	opts rueidis.ClientOption

	mu  sync.Mutex
	ttl time.Duration
	l   rueidislock.Locker
}

func (p *rueidisLockParty) locker(ttl time.Duration) (rueidislock.Locker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		if ttl != p.ttl {
			return nil, fmt.Errorf("rueidislock: a Locker of validity %v asked for %v", p.ttl, ttl)
		}
		return p.l, nil
	}
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   p.opts,
		KeyMajority:    1,
		NoLoopTracking: true,
		KeyValidity:    ttl,
		ExtendInterval: ttl / 3,
		TryNextAfter:   p.opts.ConnWriteTimeout,
	})
	if err != nil {
		return nil, err
	}
	p.l, p.ttl = l, ttl
	return l, nil
}

func (p *rueidisLockParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	l, err := p.locker(ttl)
	if err != nil {
		return nil, err
	}
	var (
		lctx   context.Context
		cancel context.CancelFunc
	)
	if wait {
		lctx, cancel, err = l.WithContext(ctx, key)
	} else {
		lctx, cancel, err = l.TryWithContext(ctx, key)
	}
	if errors.Is(err, rueidislock.ErrNotLocked) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return &rueidisLock{ctx: lctx, cancel: cancel, key: key}, nil
}

func (p *rueidisLockParty) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	return nil
}

type rueidisLock struct {
	ctx      context.Context
	cancel   context.CancelFunc
	key      string
	released atomic.Bool
}

// unlock cancels the lock's context, which deletes the key and returns when
// the delete has been answered.
func (l *rueidisLock) unlock(context.Context) error {
	l.released.Store(true)
	l.cancel()
	return nil
}

// keepAlive does nothing: the Locker extends every lock it holds.
func (l *rueidisLock) keepAlive(time.Duration) {}

// lost reports whether the lock's context ended before the release.
func (l *rueidisLock) lost() bool { return !l.released.Load() && l.ctx.Err() != nil }

// redisKey is key "0" of the lock's KeyMajority*2-1 = 1 keys.
func (l *rueidisLock) redisKey() string { return "rueidislock:0:" + l.key }

// value is not known outside the Locker: any value will do (see holdMany).
func (l *rueidisLock) value() string { return "" }
