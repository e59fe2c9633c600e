package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestErrors(t *testing.T) {
	err := error(&NotAcquiredError{Key: "k", RetryAfter: time.Second, Err: context.DeadlineExceeded})
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not match both", err)
	}
	lost := error(&LostError{Key: "k", Err: ErrOwnershipLost})
	if !errors.Is(lost, ErrLockLost) || !errors.Is(lost, ErrNotHeld) || !errors.Is(lost, ErrOwnershipLost) {
		t.Fatalf("%v does not match", lost)
	}
	if got := (&KeyError{Key: "order:1", Err: ErrNotHeld}).Error(); got != `dlock: "order:1": not held` {
		t.Fatalf("KeyError = %q", got)
	}
	var ke *KeyError
	err = fmt.Errorf("wrapped: %w", &KeyError{Op: "unlock", Key: strings.Repeat("k", 100), Err: ErrNotHeld})
	if !errors.As(err, &ke) || ke.Op != "unlock" || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("errors.As/Is through a *KeyError: %v", err)
	}
	if got := ke.Error(); got != `dlock: unlock "`+strings.Repeat("k", 40)+"…"+strings.Repeat("k", 16)+`": not held` {
		t.Fatalf("a long key in a message: %q", got)
	}
}
