package dlocktest

import "testing"

func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		c    Capabilities
		want string
	}{
		{0, "none"},
		{Fencing, "Fencing"},
		{Reentrancy | LostSignal, "Reentrancy|LostSignal"},
		{All, "Reentrancy|Fencing|RetryAfter|LostSignal"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", tc.c, got, tc.want)
		}
	}
	if !All.Has(Fencing|RetryAfter) || Fencing.Has(Fencing|Reentrancy) {
		t.Error("Has is wrong")
	}
}
