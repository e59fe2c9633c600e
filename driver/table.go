package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
)

// Handle is a driver's lock handle: a pointer type, such as *lock, to a
// struct that embeds a [Hold] and implements dlock.Lock.
type Handle interface {
	comparable
	dlock.Lock
	hold() *Hold
}

// ErrReleasedByClose is the Err of a hold that Locker.Close released: it
// matches dlock.ErrNotHeld and dlock.ErrClosed.
var ErrReleasedByClose = fmt.Errorf("%w: released by Close: %w", dlock.ErrNotHeld, dlock.ErrClosed)

// Table is the table of a Locker's holds, by key and owner, and the rules
// of dlock.Locker that rest on it:
//
//   - a Locker holds a key at most once without owner: a second
//     acquisition fails at once with dlock.ErrAlreadyHeld instead of
//     waiting on itself (Reserve);
//   - an owner may hold a key many times; Find returns the newest hold,
//     as Locker.Unlock releases it;
//   - Close is decided under the table's mutex: every acquisition is
//     either in the table, and ended by Close, or is told by Add that the
//     Locker closed, and gives its lock back;
//   - a hold leaves the table before its Done closes (End), so that
//     whoever sees Done closed may acquire the key again at once.
//
// The zero Table is not usable: call Init first.
type Table[H Handle] struct {
	log     *slog.Logger
	onEnd   func(H)
	obs     observe.Observer // nil: none (see Observe)
	backend string
	closed  atomic.Bool

	mu      sync.Mutex
	held    map[string]holds[H]
	waiting sync.WaitGroup // the waiting acquisitions, which Close waits for
}

// holds are the holds of one key: the one without owner, and those with
// one, oldest first.
type holds[H Handle] struct {
	plain H
	owned []H
}

// Init prepares an empty table of the Locker made with o: o.Logger
// receives a warning when a hold is lost and, at debug level, a line when
// one is released; o.Observer, if any, hears of the table's events, each
// naming backend: "redis", "redlock", "etcd" or "postgres" (see
// observe.Event.Backend). onEnd, when not nil, runs when a hold ends, after
// it left the table and before its Done closes: a driver stops renewing
// the hold there.
func (t *Table[H]) Init(backend string, o dlock.Options, onEnd func(H)) {
	t.log, t.onEnd = o.Logger, onEnd
	t.obs, t.backend = o.Observer, backend
	t.held = make(map[string]holds[H])
}

// Closed reports whether Close was called.
func (t *Table[H]) Closed() bool { return t.closed.Load() }

// Reserve admits a new acquisition h, still pending. It returns an error
// matching dlock.ErrClosed when the Locker closed, and dlock.ErrAlreadyHeld
// when h has no owner and the Locker holds or is acquiring its key without
// owner; then nothing changed. A hold without owner takes its place in the
// table now; call Remove when the acquisition fails. A waiting acquisition
// (wait) is counted until Leave, and Close waits for it.
func (t *Table[H]) Reserve(h H, wait bool) error {
	hd := h.hold()
	if hd.owner != "" && !wait {
		if t.Closed() {
			return Wrap("lock", hd.key, dlock.ErrClosed)
		}
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Closed() {
		return Wrap("lock", hd.key, dlock.ErrClosed)
	}
	if hd.owner == "" {
		e := t.held[hd.key]
		var zero H
		if e.plain != zero {
			return Wrap("lock", hd.key, dlock.ErrAlreadyHeld)
		}
		e.plain = h
		t.held[hd.key] = e
	}
	if wait {
		t.waiting.Add(1)
	}
	return nil
}

// Leave ends the count of a waiting acquisition that Reserve admitted.
func (t *Table[H]) Leave() { t.waiting.Done() }

// Add records that h is now held. When the Locker closed first, it
// removes h and returns an error matching dlock.ErrClosed: the caller
// must give back the lock it acquired.
//
// With an observer (see Observe), it fires h's Acquire event before any
// End of h can fire its Release or Lost.
func (t *Table[H]) Add(h H) error {
	hd := h.hold()
	if t.obs != nil {
		hd.ending.Lock()
		defer hd.ending.Unlock()
	}
	if err := t.add(h); err != nil {
		return err
	}
	if t.obs != nil {
		t.acquiredEvent(h)
	}
	return nil
}

func (t *Table[H]) add(h H) error {
	hd := h.hold()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Closed() {
		t.remove(h)
		return Wrap("lock", hd.key, dlock.ErrClosed)
	}
	if hd.owner != "" {
		e := t.held[hd.key]
		e.owned = append(e.owned, h)
		t.held[hd.key] = e
	}
	hd.state.Store(int32(Held))
	return nil
}

// Remove takes h out of the table, if it is there.
func (t *Table[H]) Remove(h H) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(h)
}

func (t *Table[H]) remove(h H) {
	key := h.hold().key
	e, ok := t.held[key]
	if !ok {
		return
	}
	var zero H
	if e.plain == h {
		e.plain = zero
	} else {
		for i, x := range e.owned {
			if x == h {
				e.owned = append(e.owned[:i:i], e.owned[i+1:]...)
				break
			}
		}
	}
	if e.plain == zero && len(e.owned) == 0 {
		delete(t.held, key)
	} else {
		t.held[key] = e
	}
}

// End ends h once, with err: released when err does not match
// dlock.ErrLockLost, else lost. It takes h out of the table, runs onEnd,
// logs, fires the Release or Lost event, and closes h's Done, in that
// order. It reports whether this call
// ended h; a call that races with another returns when the other has
// ended h.
func (t *Table[H]) End(h H, err error) bool {
	hd := h.hold()
	hd.ending.Lock()
	defer hd.ending.Unlock()
	if hd.Err() != nil {
		return false
	}
	t.Remove(h)
	if t.onEnd != nil {
		t.onEnd(h)
	}
	// Only End ends a hold, under hd.ending: this call ends it. The log
	// comes first, so that a watcher of Done finds the entry.
	if errors.Is(err, dlock.ErrLockLost) {
		t.log.WarnContext(context.Background(), "lock lost", "key", hd.key, "fence", h.Fence(), "reason", errors.Unwrap(err))
	} else if t.log.Enabled(context.Background(), slog.LevelDebug) {
		t.log.DebugContext(context.Background(), "released", "key", hd.key, "fence", h.Fence())
	}
	if t.obs != nil && hd.obs != nil && !hd.obs.acquired.IsZero() {
		t.endEvent(h, err)
	}
	return hd.end(err)
}

// Lose ends h as lost for cause, and returns h's Err: the
// *dlock.LostError, or the error that ended h first.
func (t *Table[H]) Lose(h H, cause error) error {
	t.End(h, &dlock.LostError{Key: h.hold().key, Err: cause})
	return h.hold().Err()
}

// Find returns the hold that Locker.Unlock(ctx, key) releases: the newest
// hold of key for the owner in ctx; when ctx carries no owner, the hold
// without owner, or else the newest hold made with dlock.WithOwner (a key
// has one owner at a time). A hold whose owner came in a context is found
// only with that owner in ctx. It returns an error matching
// dlock.ErrClosed or dlock.ErrNotHeld when there is none.
func (t *Table[H]) Find(ctx context.Context, key string) (H, error) {
	var zero H
	if t.Closed() {
		return zero, Wrap("unlock", key, dlock.ErrClosed)
	}
	owner, ok := dlock.OwnerFrom(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.held[key]
	if !ok && e.plain != zero && e.plain.hold().State() == Held {
		return e.plain, nil
	}
	for i := len(e.owned) - 1; i >= 0; i-- {
		if hd := e.owned[i].hold(); ok && hd.owner == owner || !ok && hd.byOption {
			return e.owned[i], nil
		}
	}
	return zero, Wrap("unlock", key, dlock.ErrNotHeld)
}

// Close marks the table closed, so that Reserve and Add refuse from now
// on, and returns the holds still held. It returns false when the table
// was closed already.
func (t *Table[H]) Close() ([]H, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Swap(true) {
		return nil, false
	}
	var all []H
	for _, e := range t.held {
		if hd := e.plain; hd != *new(H) && hd.hold().State() == Held {
			all = append(all, e.plain)
		}
		all = append(all, e.owned...)
	}
	return all, true
}

// Wait waits until every waiting acquisition that Reserve admitted has
// called Leave. Close's caller calls it after Close, once its waiters are
// told to stop.
func (t *Table[H]) Wait() { t.waiting.Wait() }
