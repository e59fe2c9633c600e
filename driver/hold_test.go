package driver

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
)

// A hold's kind: Reads for a read hold and for a write hold once
// Downgraded, which changes nothing of any other kind; CheckDowngrade
// refuses all but a write hold not downgraded yet.
func TestHoldKind(t *testing.T) {
	for _, k := range []HoldKind{HoldLock, HoldPermit, HoldRead, HoldWrite} {
		var h Hold
		h.Init(k, "k", "", false)
		h.state.Store(int32(Held))
		if h.Kind() != k || h.Reads() != (k == HoldRead) {
			t.Errorf("%s: Kind %q, Reads %t", k.Letter(), h.Kind().Letter(), h.Reads())
		}
		err := h.CheckDowngrade()
		if (k == HoldWrite) != (err == nil) || err != nil && !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("%s: CheckDowngrade = %v", k.Letter(), err)
		}
		h.Downgraded()
		want := k
		if k == HoldWrite {
			want = HoldRead
		}
		if h.Kind() != want || h.Reads() != (want == HoldRead) {
			t.Errorf("%s downgraded: Kind %q, Reads %t; want %q", k.Letter(), h.Kind().Letter(), h.Reads(), want.Letter())
		}
		if err := h.CheckDowngrade(); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("%s: a second CheckDowngrade = %v; want ErrInvalidOption", k.Letter(), err)
		}
	}
}
