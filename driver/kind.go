package driver

import (
	"fmt"

	"github.com/dlock-go/dlock"
)

// HoldKind is what a hold holds: a lock, a permit of a semaphore, or the
// read or write side of a read-write lock. Its values are the letters a
// driver stores with a hold.
type HoldKind byte

// The kinds of hold.
const (
	HoldLock   HoldKind = 0
	HoldPermit HoldKind = 'p'
	HoldRead   HoldKind = 'r'
	HoldWrite  HoldKind = 'w'
)

// Letter is the kind's letter, as a driver stores it.
func (k HoldKind) Letter() string { return string(rune(k)) }

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
