package gocronlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
	"github.com/go-co-op/gocron/v2"
)

// Locker is a gocron.Locker over a dlock.Locker. Create it with
// NewLocker; it is safe for concurrent use.
type Locker struct {
	l           dlock.Locker
	holdAtLeast time.Duration
	opts        []dlock.Option
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a gocron.Locker that takes each job's lock in l (the
// key is the job's name, as gocron passes it) with one attempt, and holds
// it at least holdAtLeast from the job's start, even if the process dies
// meanwhile, and as long as the job runs (see Lock). opts apply to every
// acquisition (dlock.WithTTL: the lease renewed while a job runs, made at
// least holdAtLeast long). A holdAtLeast shorter than the time between two
// runs of a job and longer than the schedulers' clocks disagree makes each
// run happen once across the schedulers. It returns an error matching
// dlock.ErrNilClient for a nil Locker and dlock.ErrInvalidOption for a
// negative hold.
func NewLocker(l dlock.Locker, holdAtLeast time.Duration, opts ...dlock.Option) (*Locker, error) {
	if l == nil {
		return nil, dlock.ErrNilClient
	}
	if holdAtLeast < 0 {
		return nil, dlock.ErrInvalidOption
	}
	return &Locker{l: l, holdAtLeast: holdAtLeast, opts: opts}, nil
}

// Lock takes key's lock for one run of a job, as election.TryRun does:
// without owner and without waiting, with a lease that reaches the end of
// the hold, so that the store keeps the key that long whatever becomes of
// this process. When another scheduler holds it, the error matches
// dlock.ErrNotAcquired and gocron skips the run. gocron calls the returned
// Lock's Unlock (election.Run.Unlock) after the job: the lock is released
// then, or, when the job took less than the hold, left to lapse when the
// hold ends.
func (g *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	r, err := election.TryRun(ctx, g.l, key, g.holdAtLeast, g.opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}
