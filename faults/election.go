package faults

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
)

// term is what a worker holds while it writes: a lock, or, in an election
// run, a leadership (package election), whose epoch is the fence.
type term interface {
	fence() uint64
	done() <-chan struct{}
	lost() bool // why it ended: a loss
	end(ctx context.Context) error
}

// acquire takes the lock, or campaigns until elected, as cfg says.
func acquire(ctx context.Context, cfg workerConfig, l dlock.Locker) (term, error) {
	if !cfg.Election {
		lk, err := l.Lock(ctx, cfg.Key, dlock.WithFencing(true), dlock.WithWait(cfg.Wait))
		if err != nil {
			return nil, err
		}
		return lockTerm{lk}, nil
	}
	e, err := election.New(l, cfg.Key, dlock.WithWait(cfg.Wait))
	if err != nil {
		return nil, err
	}
	ld, err := e.Campaign(ctx, "worker")
	if err != nil {
		return nil, err
	}
	return leaderTerm{ld}, nil
}

type lockTerm struct{ lk dlock.Lock }

func (t lockTerm) fence() uint64                 { return t.lk.Fence() }
func (t lockTerm) done() <-chan struct{}         { return t.lk.Done() }
func (t lockTerm) lost() bool                    { return errors.Is(t.lk.Err(), dlock.ErrLockLost) }
func (t lockTerm) end(ctx context.Context) error { return t.lk.Unlock(ctx) }

type leaderTerm struct{ ld *election.Leadership }

func (t leaderTerm) fence() uint64                 { return t.ld.Epoch() }
func (t leaderTerm) done() <-chan struct{}         { return t.ld.Done() }
func (t leaderTerm) lost() bool                    { return errors.Is(t.ld.Err(), dlock.ErrLockLost) }
func (t leaderTerm) end(ctx context.Context) error { return t.ld.Resign(ctx) }
