package driver

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// The optional capabilities of a Locker and of its locks, beyond
// dlock.Locker and dlock.Lock. A driver declares the ones it has with
// assertions (var _ Watcher = (*Locker)(nil)); package dlock, the
// election package and the dlock command discover them with type
// assertions, and programs reach them through dlock's helpers
// (dlock.Downgrade, dlock.UnlockAfter, dlock.LockAll) or the packages
// built on them.

// Watcher is a Locker that can say when a key's lock may have changed
// hands, so that an observer (see package election) reads the lock again
// then instead of polling. Every driver implements it.
type Watcher interface {
	// Watch returns a channel that receives a value once the watch is in
	// place (or, if the store could not be reached, once it gave up for
	// now), and then after each change to key's lock that the store tells
	// of. A value not yet received stands for any number of changes: sends
	// never block. The channel is closed when ctx ends or the Locker is
	// closed. Watch returns an error, and starts nothing, for a bad key or
	// a closed Locker.
	//
	// A watch says that something may have changed, never what: read the
	// lock (see dlock.Inspector) to learn it. Not every change is told on
	// every store: a lease that runs out unrenewed is a change that Redis
	// does not announce, and neither is a plain lock taken by a bare SET.
	// An observer therefore reads the lock again, at the latest, when the
	// lease it last saw would have run out.
	Watch(ctx context.Context, key string) (<-chan struct{}, error)
}

// Lapser is a dlock.Lock that can be released by letting its lease lapse
// (see dlock.UnlockAfter, which calls it). Every driver's locks implement
// it.
type Lapser interface {
	// UnlockAfter sets the lock's remaining lease to d (rounded up to what
	// the store can express), stops renewing it and forgets it: the handle
	// ends as released at once (Done closes, Err matches ErrNotHeld), and
	// neither the watchdog nor the Locker's Close touches the lock again,
	// which the store deletes when d has passed. An owner's lock whose
	// lease is longer than d keeps it (its other holds need it). A d of
	// zero or less is Unlock. It returns what Unlock returns for a lock
	// that is no longer held; an error that leaves the outcome unknown
	// leaves the handle held, no longer renewed, to lapse at its deadline.
	UnlockAfter(ctx context.Context, d time.Duration) error
}

// Downgrader is a write lock that can become a read lock without a gap
// (see dlock.Downgrade, which calls it). The write locks of a
// dlock.RWLocker implement it.
type Downgrader interface {
	// Downgrade turns the write lock into a read lock in one step: the
	// handle stays held, with the same token, fence, lease and Done, and
	// no writer can come in between. Readers that waited behind it may
	// enter, unless another writer waits ahead of them.
	Downgrade(ctx context.Context) error
}

// MultiLocker is a Locker that can take several keys in one step, all of
// them or none, and release them in one. It is optional: dlock.LockAll,
// dlock.TryLockAll and dlock.DoAll work with any Locker, and use it when
// the Locker has it. The Redis driver has it, one round trip each way for
// keys on one server or in one Cluster slot.
type MultiLocker interface {
	dlock.Locker
	// TryLockMulti makes one attempt at every key of keys (distinct) at
	// once: it takes them all, or none. It returns one Lock per key, in
	// the order of keys, each the Lock that TryLock would have returned
	// for its key, with the same options. When a key is busy, the error
	// is that key's *dlock.NotAcquiredError. When the keys cannot be taken
	// in one step (they live on different servers, or an option asks for
	// what the step cannot do), the error matches dlock.ErrNotTogether and
	// nothing changed.
	TryLockMulti(ctx context.Context, keys []string, opts ...dlock.Option) ([]dlock.Lock, error)
	// UnlockMulti releases locks of this Locker, each as its Unlock would,
	// in one step when it can, and returns the errors of the releases that
	// failed, joined.
	UnlockMulti(ctx context.Context, locks []dlock.Lock) error
}

// KindInspector is a dlock.Inspector that also reads semaphores and
// read-write locks, which live beside the locks of the same keys. The
// dlock command's status and ls use it.
type KindInspector interface {
	// InspectKind reads what the store holds about key's lock of kind k.
	// It changes nothing.
	InspectKind(ctx context.Context, k dlock.Kind, key string) (dlock.Info, error)
	// ListKind returns the held locks of kind k whose key matches pattern
	// (see dlock.Inspector.List), sorted by key.
	ListKind(ctx context.Context, k dlock.Kind, pattern string) ([]dlock.Info, error)
}

// A lock of several keys lapses when all of them can.
var _ Lapser = (*dlock.MultiLock)(nil)
