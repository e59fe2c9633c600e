package driver

import (
	"fmt"

	"github.com/dlock-go/dlock"
)

// HoldKind is what a hold holds: a lock, a permit of a semaphore, or the
// read or write side of a read-write lock. What a driver needs to know of
// a kind (its letter, the namespace of its keys, the kind of lock it is a
// hold of) is in one table, read by its methods.
type HoldKind byte

// The kinds of hold.
const (
	HoldLock   HoldKind = 0
	HoldPermit HoldKind = 'p'
	HoldRead   HoldKind = 'r'
	HoldWrite  HoldKind = 'w'
)

// kindInfo is what the table says of a kind of hold.
type kindInfo struct {
	letter, space string
	lock          dlock.Kind
}

// kinds is the table of the kinds of hold; a value outside it reads as
// HoldLock.
var kinds = map[HoldKind]kindInfo{
	HoldLock:   {letter: "l", space: "lock", lock: dlock.KindLock},
	HoldPermit: {letter: "p", space: "sem", lock: dlock.KindSemaphore},
	HoldRead:   {letter: "r", space: "rw", lock: dlock.KindRWLock},
	HoldWrite:  {letter: "w", space: "rw", lock: dlock.KindRWLock},
}

func (k HoldKind) info() kindInfo {
	if i, ok := kinds[k]; ok {
		return i
	}
	return kinds[HoldLock]
}

// Letter is the kind's letter, as a driver stores it with a hold: "l",
// "p", "r" or "w".
func (k HoldKind) Letter() string { return k.info().letter }

// Space names the namespace of the kind's keys, which a driver puts
// between its prefix and the key: "lock", "sem" (a semaphore's permits),
// or "rw" (a read-write lock's readers and writers, together).
func (k HoldKind) Space() string { return k.info().space }

// Lock is the kind of lock that a hold of kind k holds a part of.
func (k HoldKind) Lock() dlock.Kind { return k.info().lock }

// HoldKindOf is the kind of hold that the inspection of a lock of kind k
// reads: HoldPermit for a semaphore, HoldRead for a read-write lock (whose
// holds of either side live together). Any other kind is an error
// matching dlock.ErrInvalidOption.
func HoldKindOf(k dlock.Kind) (HoldKind, error) {
	switch k {
	case dlock.KindSemaphore:
		return HoldPermit, nil
	case dlock.KindRWLock:
		return HoldRead, nil
	}
	return 0, fmt.Errorf("%w: no such kind of lock: %v", dlock.ErrInvalidOption, k)
}
