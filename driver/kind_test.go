package driver

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
)

func TestHoldKindOf(t *testing.T) {
	for k, want := range map[dlock.Kind]HoldKind{dlock.KindSemaphore: HoldPermit, dlock.KindRWLock: HoldRead} {
		if got, err := HoldKindOf(k); err != nil || got != want {
			t.Errorf("HoldKindOf(%v) = %q, %v; want %q", k, got.Letter(), err, want.Letter())
		}
	}
	for _, k := range []dlock.Kind{dlock.KindLock, dlock.Kind(99)} {
		if _, err := HoldKindOf(k); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("HoldKindOf(%v): %v, want ErrInvalidOption", k, err)
		}
	}
}

// The table of kinds: each kind's letter, namespace and kind of lock.
func TestHoldKindTable(t *testing.T) {
	for _, c := range []struct {
		k             HoldKind
		letter, space string
		lock          dlock.Kind
	}{
		{HoldLock, "l", "lock", dlock.KindLock},
		{HoldPermit, "p", "sem", dlock.KindSemaphore},
		{HoldRead, "r", "rw", dlock.KindRWLock},
		{HoldWrite, "w", "rw", dlock.KindRWLock},
		{HoldKind('?'), "l", "lock", dlock.KindLock},
	} {
		if c.k.Letter() != c.letter || c.k.Space() != c.space || c.k.Lock() != c.lock {
			t.Errorf("kind %q: letter %q, space %q, lock %v; want %q, %q, %v", rune(c.k), c.k.Letter(), c.k.Space(), c.k.Lock(), c.letter, c.space, c.lock)
		}
	}
}
