package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
)

// runHold is the hold of a RunOnce run (PrimRunOnce) with lease ttl: the
// key stays taken that long from the acquisition's call, whatever becomes
// of the worker, as a scheduled job's tick needs.
func runHold(ttl time.Duration) time.Duration { return 2 * ttl }

// runTerm is one run of election.RunOnce: its job is the critical
// section, which the worker runs while RunOnce waits on the job's return
// (end).
type runTerm struct {
	lk     dlock.Lock
	hold   time.Duration
	finish chan struct{} // closed by end: the job returns
	result chan error    // RunOnce's return
}

// runOnce calls election.RunOnce in a goroutine of its own and returns
// once the job started (the run's term) or RunOnce returned without
// running it (its error: busy, or the store is down).
func runOnce(ctx context.Context, l dlock.Locker, key string, hold time.Duration) (term, error) {
	t := &runTerm{hold: hold, finish: make(chan struct{}), result: make(chan error, 1)}
	started := make(chan dlock.Lock, 1)
	go func() {
		t.result <- election.RunOnce(ctx, l, key, hold, func(jctx context.Context) error {
			lk, ok := dlock.LockFrom(jctx)
			if !ok {
				return fmt.Errorf("the job's context carries no lock")
			}
			started <- lk
			<-t.finish // the job runs until the worker's section ends
			return nil
		}, dlock.WithFencing(true))
	}()
	select {
	case t.lk = <-started:
		return t, nil
	case err := <-t.result:
		if err == nil {
			err = errors.New("RunOnce returned without running its job")
		}
		return nil, err
	}
}

func (t *runTerm) targets() []target     { return []target{{t.lk.Key(), t.lk.Fence(), exclusive}} }
func (t *runTerm) done() <-chan struct{} { return t.lk.Done() }
func (t *runTerm) lost() bool            { return errors.Is(t.lk.Err(), dlock.ErrLockLost) }
func (t *runTerm) taken() bool           { return errors.Is(t.lk.Err(), dlock.ErrOwnershipLost) }

// refresh renews the run's lease to at least its hold: a shorter one would
// give the hold up.
func (t *runTerm) refresh(ctx context.Context, ttl time.Duration) error {
	return t.lk.Refresh(ctx, max(ttl, t.hold))
}

// end returns from the job and waits for RunOnce, which lets the key
// lapse at the end of the hold, or releases it once the hold has passed.
func (t *runTerm) end(ctx context.Context) error {
	close(t.finish)
	select {
	case err := <-t.result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
