package driver

import (
	"context"

	"github.com/dlock-go/dlock"
)

// Tables are a Locker's tables of holds, one for each kind of hold that
// lives apart: locks, permits of semaphores, and the holds of read-write
// locks (readers and writers together). Of picks a hold's table by its
// kind; Init, Close and Wait act on all of them. A driver without some
// kind of hold leaves its table empty.
type Tables[H Handle] struct {
	Locks, Permits, RW Table[H]
}

// All returns every table, the locks' first.
func (ts *Tables[H]) All() [3]*Table[H] { return [3]*Table[H]{&ts.Locks, &ts.Permits, &ts.RW} }

// Init prepares every table (see [Table.Init]).
func (ts *Tables[H]) Init(backend string, o dlock.Options, onEnd func(H)) {
	for _, t := range ts.All() {
		t.Init(backend, o, onEnd)
	}
}

// Of returns the table of the holds of kind k.
func (ts *Tables[H]) Of(k HoldKind) *Table[H] {
	switch k {
	case HoldPermit:
		return &ts.Permits
	case HoldRead, HoldWrite:
		return &ts.RW
	}
	return &ts.Locks
}

// Close closes every table and returns the holds they held. It reports
// false, and closes nothing, when the tables were closed already (see
// [Table.Close]).
func (ts *Tables[H]) Close() (held []H, ok bool) {
	if held, ok = ts.Locks.Close(); !ok {
		return nil, false
	}
	for _, t := range []*Table[H]{&ts.Permits, &ts.RW} {
		more, _ := t.Close()
		held = append(held, more...)
	}
	return held, true
}

// Wait waits until the waiting acquisitions of every table have left
// (see [Table.Wait]).
func (ts *Tables[H]) Wait() {
	for _, t := range ts.All() {
		t.Wait()
	}
}

// UnlockRW is a driver's RUnlock (read) or WUnlock: it releases the hold
// of key that Table.Find finds among the read-write holds, provided that
// it is of that side (see Hold.Reads). Else it returns an error matching
// dlock.ErrNotHeld.
func (ts *Tables[H]) UnlockRW(ctx context.Context, key string, read bool) error {
	h, err := ts.RW.Find(ctx, key)
	if err != nil {
		return err
	}
	if h.hold().Reads() != read {
		return Wrap("unlock", key, dlock.ErrNotHeld)
	}
	return h.Unlock(ctx)
}
