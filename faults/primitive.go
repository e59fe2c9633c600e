package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
)

// The primitives a run can check.
const (
	PrimLock      = "lock"      // Locker.Lock of one key
	PrimElection  = "election"  // campaigns in an election on one key (package election)
	PrimSemaphore = "semaphore" // permits of one key (dlock.Semaphore), at most Config.Limit at once
	PrimRWLock    = "rwlock"    // read and write locks of one key (dlock.RWLocker), some writers downgrading
	PrimMulti     = "multi"     // dlock.LockAll over two or three of a few keys
	// PrimRunOnce runs a scheduled job's tick with election.RunOnce (one
	// attempt; the key stays taken for twice the TTL from the call).
	PrimRunOnce = "runonce"
)

// Primitives lists the primitives, in the order of the CLI's help.
var Primitives = []string{PrimLock, PrimElection, PrimRunOnce, PrimSemaphore, PrimRWLock, PrimMulti}

// multiKeys are the keys of a multi-key run.
var multiKeys = []string{"faults:a", "faults:b", "faults:c", "faults:d"}

// implements reports whether the backend's Locker has what the primitive
// needs: a semaphore or a read-write lock needs its interface; a lock, an
// election, RunOnce and LockAll work on any Locker. A driver that gains an
// interface can be checked with it at once.
func implements(backend, primitive string) bool {
	var l any
	switch backend {
	case "redis", "sentinel", "cluster":
		l = (*redislock.Locker)(nil)
	case "redlock":
		l = (*redlock.Locker)(nil)
	case "etcd":
		l = (*etcdlock.Locker)(nil)
	case "postgres":
		l = (*postgreslock.Locker)(nil)
	case "none":
		l = noLock{}
	}
	ok := true
	switch primitive {
	case PrimSemaphore:
		_, ok = l.(dlock.Semaphore)
	case PrimRWLock:
		_, ok = l.(dlock.RWLocker)
	}
	return ok
}

// target is a key a hold writes to, with the fence that guards it there.
type target struct {
	key   string
	fence uint64
	kind  string // exclusive, shared or permit
}

// term is what a worker holds while it writes: a lock, a permit, a read
// or write lock, the locks of several keys, or, in an election run, a
// leadership (package election), whose epoch is the fence.
type term interface {
	targets() []target
	done() <-chan struct{}
	lost() bool  // why it ended: a loss
	taken() bool // the loss came from the server, which no longer had the hold
	refresh(ctx context.Context, ttl time.Duration) error
	end(ctx context.Context) error
}

// plan is what a worker asks for next: how it shares the keys, which
// keys (in the order it gives them), and for a write lock whether it
// downgrades.
type plan struct {
	kind      string
	keys      []string
	downgrade bool
}

// planFor draws the next plan for cfg.Primitive from rng: for a
// read-write lock, a read or a write (and whether the writer downgrades),
// for a multi-key lock, the keys and their order.
func planFor(cfg workerConfig, rng *rand.Rand) plan {
	p := plan{kind: exclusive, keys: []string{cfg.Key}}
	switch cfg.Primitive {
	case PrimMulti:
		keys := slices.Clone(multiKeys)
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		p.keys = keys[:2+rng.IntN(2)]
	case PrimSemaphore:
		p.kind = permit
	case PrimRWLock:
		if rng.IntN(3) > 0 { // two readers for a writer
			p.kind = shared
		} else {
			p.downgrade = rng.IntN(2) == 0
		}
	}
	return p
}

// acquire takes what p says, on cfg.Primitive.
func acquire(ctx context.Context, cfg workerConfig, l dlock.Locker, p plan) (term, error) {
	opts := []dlock.Option{dlock.WithFencing(true), dlock.WithWait(cfg.Wait)}
	t := &lockTerm{kind: p.kind, downgrade: p.downgrade}
	var err error
	switch cfg.Primitive {
	case PrimRunOnce:
		return runOnce(ctx, l, cfg.Key, runHold(cfg.TTL))
	case PrimElection:
		e, err := election.New(l, cfg.Key, dlock.WithWait(cfg.Wait))
		if err != nil {
			return nil, err
		}
		ld, err := e.Campaign(ctx, "worker")
		if err != nil {
			return nil, err
		}
		lk, ok := dlock.LockFrom(ld.Context())
		if !ok {
			return nil, fmt.Errorf("the leadership's context carries no lock")
		}
		return leaderTerm{ld, lk, cfg.Key}, nil
	case PrimMulti:
		lk, err := dlock.LockAll(ctx, l, p.keys, opts...)
		if err != nil {
			return nil, err
		}
		return multiTerm{lk.(*dlock.MultiLock)}, nil
	case PrimSemaphore:
		sem, ok := l.(dlock.Semaphore)
		if !ok {
			return nil, fmt.Errorf("%T is not a dlock.Semaphore", l)
		}
		t.lk, err = sem.Acquire(ctx, cfg.Key, cfg.Limit, opts...)
	case PrimRWLock:
		rw, ok := l.(dlock.RWLocker)
		if !ok {
			return nil, fmt.Errorf("%T is not a dlock.RWLocker", l)
		}
		if p.kind == shared {
			t.lk, err = rw.RLock(ctx, cfg.Key, opts...)
		} else {
			t.lk, err = rw.WLock(ctx, cfg.Key, opts...)
		}
	default:
		t.lk, err = l.Lock(ctx, cfg.Key, opts...)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// lockTerm is a Lock of one key: a lock, a permit, a read or write lock.
type lockTerm struct {
	lk        dlock.Lock
	kind      string
	downgrade bool // a write lock that becomes a read lock between its writes
}

func (t *lockTerm) targets() []target {
	return []target{{t.lk.Key(), t.lk.Fence(), t.kind}}
}
func (t *lockTerm) done() <-chan struct{} { return t.lk.Done() }
func (t *lockTerm) lost() bool            { return errors.Is(t.lk.Err(), dlock.ErrLockLost) }
func (t *lockTerm) taken() bool           { return errors.Is(t.lk.Err(), dlock.ErrOwnershipLost) }
func (t *lockTerm) refresh(ctx context.Context, ttl time.Duration) error {
	return t.lk.Refresh(ctx, ttl)
}
func (t *lockTerm) end(ctx context.Context) error { return t.lk.Unlock(ctx) }

// multiTerm is the Lock of several keys that LockAll returns: each key is
// written with its own fence.
type multiTerm struct{ m *dlock.MultiLock }

func (t multiTerm) targets() []target {
	var ts []target
	for _, lk := range t.m.Locks() {
		ts = append(ts, target{lk.Key(), lk.Fence(), exclusive})
	}
	return ts
}
func (t multiTerm) done() <-chan struct{} { return t.m.Done() }
func (t multiTerm) lost() bool            { return errors.Is(t.m.Err(), dlock.ErrLockLost) }
func (t multiTerm) taken() bool           { return errors.Is(t.m.Err(), dlock.ErrOwnershipLost) }
func (t multiTerm) refresh(ctx context.Context, ttl time.Duration) error {
	return t.m.Refresh(ctx, ttl)
}
func (t multiTerm) end(ctx context.Context) error { return t.m.Unlock(ctx) }

// leaderTerm is a leadership; it renews through the lock its context
// carries.
type leaderTerm struct {
	ld  *election.Leadership
	lk  dlock.Lock
	key string
}

func (t leaderTerm) targets() []target     { return []target{{t.key, t.ld.Epoch(), exclusive}} }
func (t leaderTerm) done() <-chan struct{} { return t.ld.Done() }
func (t leaderTerm) lost() bool            { return errors.Is(t.ld.Err(), dlock.ErrLockLost) }
func (t leaderTerm) taken() bool           { return errors.Is(t.ld.Err(), dlock.ErrOwnershipLost) }
func (t leaderTerm) refresh(ctx context.Context, ttl time.Duration) error {
	return t.lk.Refresh(ctx, ttl)
}
func (t leaderTerm) end(ctx context.Context) error { return t.ld.Resign(ctx) }
