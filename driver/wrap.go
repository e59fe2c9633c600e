package driver

import (
	"fmt"

	"github.com/dlock-go/dlock"
)

// Wrap returns err as the *dlock.KeyError of the call op ("lock",
// "unlock", "inspect", ...) on key, or nil when err is nil. Every error a
// driver returns from a call on a key goes through it or its two
// siblings, Hold.Wrap and Invalid, so that none lacks its operation.
func Wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return &dlock.KeyError{Op: op, Key: key, Err: err}
}

// Invalid returns the *dlock.KeyError of the call op on key refused for a
// bad argument: its message is format with args, and it matches
// dlock.ErrInvalidOption.
func Invalid(op, key, format string, args ...any) error {
	return Wrap(op, key, fmt.Errorf("%w: %s", dlock.ErrInvalidOption, fmt.Sprintf(format, args...)))
}

// Wrap returns err as the *dlock.KeyError of the call op on the hold's
// key, or nil when err is nil.
func (h *Hold) Wrap(op string, err error) error { return Wrap(op, h.key, err) }
