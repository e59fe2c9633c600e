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
