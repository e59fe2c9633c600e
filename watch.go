package dlock

import (
	"context"
	"time"
)

// Watcher is a [Locker] that can say when a key's lock may have changed
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
	// lock (see [Inspector]) to learn it. Not every change is told on every
	// store: a lease that runs out unrenewed is a change that Redis does
	// not announce, and neither is a plain lock taken by a bare SET. An
	// observer therefore reads the lock again, at the latest, when the
	// lease it last saw would have run out.
	Watch(ctx context.Context, key string) (<-chan struct{}, error)
}

// Lapser is a [Lock] that can be released by letting its lease lapse: the
// way to keep a key taken for a while after the work under it is done,
// even after the process exits (a scheduled job that must not run twice
// in one tick on hosts whose clocks disagree). Every driver's locks
// implement it.
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
