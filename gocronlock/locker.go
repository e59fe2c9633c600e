package gocronlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
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
// it at least holdAtLeast from the job's start and as long as the job
// runs (see Lock). opts apply to every acquisition (dlock.WithTTL: the
// lease renewed while a job runs). A holdAtLeast shorter than the time
// between two runs of a job and longer than the schedulers' clocks
// disagree makes each run happen once across the schedulers. It returns
// an error matching dlock.ErrNilClient for a nil Locker and
// dlock.ErrInvalidOption for a negative hold.
func NewLocker(l dlock.Locker, holdAtLeast time.Duration, opts ...dlock.Option) (*Locker, error) {
	if l == nil {
		return nil, dlock.ErrNilClient
	}
	if holdAtLeast < 0 {
		return nil, dlock.ErrInvalidOption
	}
	return &Locker{l: l, holdAtLeast: holdAtLeast, opts: opts}, nil
}

// Lock takes key's lock for one run of a job, without owner and without
// waiting: when another scheduler holds it, the error matches
// dlock.ErrNotAcquired and gocron skips the run. gocron calls the returned
// Lock's Unlock after the job: the lock is released then, or, when the job
// took less than the hold, left to lapse when the hold ends (see
// dlock.Lapser), so that the key stays taken even if the process exits.
func (g *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lk, err := g.l.TryLock(dlock.ContextWithOwner(ctx, ""), key, g.opts...)
	if err != nil {
		return nil, err
	}
	return &lock{lk: lk, until: time.Now().Add(g.holdAtLeast)}, nil
}

// lock is one job run's lock.
type lock struct {
	lk    dlock.Lock
	until time.Time // the end of the hold
}

// Unlock releases the lock, or lets it lapse at the end of the hold. A
// lock that cannot lapse is held until then: Unlock waits, or returns
// when ctx ends, releasing it.
func (l *lock) Unlock(ctx context.Context) error {
	rest := time.Until(l.until)
	if rest <= 0 {
		return l.lk.Unlock(context.WithoutCancel(ctx))
	}
	if lapser, ok := l.lk.(dlock.Lapser); ok {
		return lapser.UnlockAfter(context.WithoutCancel(ctx), rest)
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.lk.Done():
	case <-ctx.Done():
	}
	return l.lk.Unlock(context.WithoutCancel(ctx))
}
