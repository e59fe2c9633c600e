package driver

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/dlock-go/dlock"
)

// State is where a hold is in its life.
//
//	Pending ──acquired (Table.Add)──▶ Held ──released──▶ Released
//	   │                                └───lost───────▶ Lost
//	   └── the attempt failed: the hold never leaves Pending
//
// A hold leaves Held once, through Table.End, and its Done closes then.
type State int32

// The states of a hold.
const (
	Pending  State = iota // being acquired
	Held                  // acquired, not yet ended
	Released              // given back by its holder, or by Close
	Lost                  // expired, taken, or unreachable past its deadline
)

// Hold is the part of a driver's lock handle that every driver shares: its
// key and owner, its state, and Done and Err. A driver embeds it in its
// handle, whose other methods do the backend's I/O, and gives the handle
// to a [Table], which moves the hold through its states. The zero Hold is
// not usable: call Init first. Its methods are safe for concurrent use.
type Hold struct {
	key, owner string
	byOption   bool // the owner came from dlock.WithOwner, not from the context
	state      atomic.Int32
	kind       atomic.Uint32 // a HoldKind; HoldRead once a write hold is downgraded
	token      string
	fence      uint64

	ending sync.Mutex // serialises Table.End, and the events of the hold
	obs    *observed  // the acquisition, for the Locker's observer; nil without one
	mu     sync.Mutex // guards err and done
	err    error
	done   chan struct{} // made on the first call to Done
}

// Init prepares a pending hold of kind k on key for owner ("" for none);
// byOption says that the owner came from dlock.WithOwner rather than from
// the context, which lets Locker.Unlock without an owner find it.
func (h *Hold) Init(k HoldKind, key, owner string, byOption bool) {
	h.key, h.owner, h.byOption = key, owner, byOption && owner != ""
	h.kind.Store(uint32(k))
}

// Token returns the random value that identifies the acquisition.
func (h *Hold) Token() string { return h.token }

// SetToken sets the token, before the hold is added to its table.
func (h *Hold) SetToken(token string) { h.token = token }

// TokenRef returns the token's address, for a driver that boxes it once
// as a command argument: nothing may write through it.
func (h *Hold) TokenRef() *string { return &h.token }

// Fence returns the fencing token of the acquisition, which the driver
// documents.
func (h *Hold) Fence() uint64 { return h.fence }

// SetFence sets the fence, before the hold is added to its table (or,
// for a grant, before the waiter returns it).
func (h *Hold) SetFence(fence uint64) { h.fence = fence }

// Kind returns what the hold holds now: the kind it was acquired as, but
// HoldRead for a write hold that Downgraded made a read hold.
func (h *Hold) Kind() HoldKind { return HoldKind(h.kind.Load()) }

// Reads reports whether the hold is a read hold: taken as one, or
// downgraded.
func (h *Hold) Reads() bool { return h.Kind() == HoldRead }

// Downgraded records that the write hold became a read hold: Kind returns
// HoldRead from now on.
func (h *Hold) Downgraded() { h.kind.CompareAndSwap(uint32(HoldWrite), uint32(HoldRead)) }

// Key returns the key the caller asked for.
func (h *Hold) Key() string { return h.key }

// Owner returns the owner the hold was acquired for, "" for none.
func (h *Hold) Owner() string { return h.owner }

// State returns the hold's state.
func (h *Hold) State() State { return State(h.state.Load()) }

func (h *Hold) hold() *Hold { return h }

// closedChan is Done's channel for a hold that ended before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel that is closed when the hold ends, in the manner
// of context.Context. The channel is made on the first call, so that a
// hold nobody watches costs no channel.
func (h *Hold) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		if h.err != nil {
			return closedChan
		}
		h.done = make(chan struct{})
	}
	return h.done
}

// Err is nil while the hold is pending or held, then why it ended.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Check returns nil while the hold is held. After it ended it returns the
// error of a call op ("unlock", "refresh", ...) on the handle: after a
// release, a *dlock.KeyError matching dlock.ErrNotHeld; after a loss, the
// *dlock.LostError.
func (h *Hold) Check(op string) error {
	switch h.State() {
	case Released:
		return Wrap(op, h.key, dlock.ErrNotHeld)
	case Lost:
		return h.Err()
	}
	return nil
}

// CheckDowngrade returns nil when a Downgrade may go ahead: the hold is a
// write hold, not downgraded yet, and held. Else it returns the error of
// the Downgrade: one matching dlock.ErrInvalidOption, or Check's.
func (h *Hold) CheckDowngrade() error {
	if h.Kind() != HoldWrite {
		return Invalid("downgrade", h.key, "not a write lock")
	}
	return h.Check("downgrade")
}

// end moves the hold to Released or Lost (a *dlock.LostError, or any
// error matching dlock.ErrLockLost) once, and closes Done. It reports
// whether this call ended it.
func (h *Hold) end(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return false
	}
	h.err = err
	if errors.Is(err, dlock.ErrLockLost) {
		h.state.Store(int32(Lost))
	} else {
		h.state.Store(int32(Released))
	}
	if h.done != nil {
		close(h.done)
	}
	return true
}
