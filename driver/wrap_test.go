package driver

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
)

// The three shapes of a call's error: each a *dlock.KeyError with its
// operation and key, matching its cause; nil stays nil.
func TestWrap(t *testing.T) {
	var h Hold
	h.Init(HoldLock, "k", "", false)
	cause := errors.New("no reply")
	for _, c := range []struct {
		err   error
		op    string
		cause error
		text  string
	}{
		{Wrap("lock", "k", cause), "lock", cause, `dlock: lock "k": no reply`},
		{h.Wrap("unlock", cause), "unlock", cause, `dlock: unlock "k": no reply`},
		{Invalid("lock", "k", "limit %d is outside 1 to %d", 0, 9), "lock", dlock.ErrInvalidOption, `dlock: lock "k": invalid option: limit 0 is outside 1 to 9`},
	} {
		var ke *dlock.KeyError
		if !errors.As(c.err, &ke) || ke.Op != c.op || ke.Key != "k" || !errors.Is(c.err, c.cause) || c.err.Error() != c.text {
			t.Errorf("got %#v (%v); want a KeyError of %q on \"k\" matching %v, reading %q", c.err, c.err, c.op, c.cause, c.text)
		}
	}
	if err := Wrap("lock", "k", nil); err != nil {
		t.Errorf("Wrap of nil = %#v; want nil", err)
	}
	if err := h.Wrap("lock", nil); err != nil {
		t.Errorf("Hold.Wrap of nil = %#v; want nil", err)
	}
}
