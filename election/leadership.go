package election

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// ErrResigned is the cause of a leadership's context after Resign.
var ErrResigned = errors.New("election: resigned")

// Leadership is one term of office, returned by [Election.Campaign]. Its
// methods are safe for concurrent use.
//
// It ends once: by [Leadership.Resign], or when the lock is lost (its lease
// deadline passed without renewal, an operator deleted it, the Locker was
// closed). Its context is cancelled then, with the reason as its cause.
type Leadership struct {
	lk      dlock.Lock
	value   string
	ctx     context.Context
	cancel  context.CancelCauseFunc
	release func() error // dlock.Guard's: stops watching the lock, unlocks it

	mu        sync.Mutex
	resigning bool           // Resign began: Go refuses new work
	work      sync.WaitGroup // the work started with Go
}

func newLeadership(ctx context.Context, lk dlock.Lock, value string) *Leadership {
	guarded, release := dlock.Guard(context.WithoutCancel(ctx), lk)
	lctx, cancel := context.WithCancelCause(guarded)
	return &Leadership{lk: lk, value: value, ctx: lctx, cancel: cancel, release: release}
}

// Value returns what the leader campaigned with.
func (ld *Leadership) Value() string { return ld.value }

// Epoch returns the fence of this election: strictly greater than the
// epoch of every earlier leader of the election. Hand it to the storage
// the leader writes to, which refuses an epoch below the highest it saw.
func (ld *Leadership) Epoch() uint64 { return ld.lk.Fence() }

// Context returns a context that is cancelled the moment the leadership
// ends; context.Cause says why: an error matching dlock.ErrLockLost (the
// lock was lost), dlock.ErrClosed (its Locker was closed), or
// ErrResigned. It carries the values of the campaign's context, and the
// lock (see dlock.LockFrom).
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Done returns a channel that is closed when the leadership ends: the
// Context's.
func (ld *Leadership) Done() <-chan struct{} { return ld.ctx.Done() }

// Err is nil while the leadership lasts, then why it ended: the cause of
// its Context.
func (ld *Leadership) Err() error {
	if ld.ctx.Err() == nil {
		return nil
	}
	return context.Cause(ld.ctx)
}

// Go runs fn in a goroutine of its own, with the leadership's Context, and
// counts it as work in flight: Resign releases the lock only after fn has
// returned. It returns an error matching ErrResigned, and does not run fn,
// once Resign began, and the leadership's end cause once it ended.
func (ld *Leadership) Go(fn func(ctx context.Context)) error {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.resigning {
		return ErrResigned
	}
	if err := ld.Err(); err != nil {
		return err
	}
	ld.work.Add(1)
	go func() {
		defer ld.work.Done()
		fn(ld.ctx)
	}()
	return nil
}

// Resign ends the leadership once the work started with Go has drained:
// it refuses new work, waits for the work in flight to return while the
// lock stays held (and renewed), then cancels the Context with
// ErrResigned and releases the lock, which the next campaigner gets at
// once. So no other leader starts while this one still works.
//
// When ctx ends first, Resign cancels the Context, so that the work stops,
// and waits for it to return before it releases: it then returns an error
// matching ctx.Err(). Work that ignores its context keeps Resign waiting,
// and the lock held: exclusion is never traded for a prompt return.
//
// Resign returns the loss (matching dlock.ErrLockLost) when the
// leadership was lost before, after the work returned, and an error
// matching dlock.ErrNotHeld when called again.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.mu.Lock()
	again := ld.resigning
	ld.resigning = true
	ld.mu.Unlock()
	if again {
		return driver.Wrap("resign", ld.lk.Key(), dlock.ErrNotHeld)
	}
	drained := make(chan struct{})
	go func() {
		ld.work.Wait()
		close(drained)
	}()
	var cut error
	select {
	case <-drained:
	case <-ld.ctx.Done(): // lost: the work was told to stop
		<-drained
	case <-ctx.Done():
		cut = fmt.Errorf("election: resign: work in flight cut short: %w", ctx.Err())
		ld.cancel(ErrResigned)
		<-drained
	}
	lost := ld.Err()
	if errors.Is(lost, ErrResigned) {
		lost = nil // cancelled above, when ctx ended
	}
	ld.cancel(ErrResigned)
	err := ld.release()
	if lost != nil {
		return lost
	}
	return errors.Join(cut, err)
}
