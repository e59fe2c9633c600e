package driver

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestTally(t *testing.T) {
	type hold struct {
		kind  HoldKind
		owner string
		ttl   time.Duration
	}
	for _, tc := range []struct {
		name  string
		holds []hold
		want  dlock.Info
	}{
		{"none", nil, dlock.Info{}},
		{"one owner", []hold{{HoldRead, "a", time.Second}, {HoldRead, "a", 3 * time.Second}},
			dlock.Info{Held: true, Holds: 2, Readers: 2, TTL: 3 * time.Second, Owner: "a"}},
		{"two owners", []hold{{HoldRead, "a", time.Second}, {HoldWrite, "b", 2 * time.Second}, {HoldRead, "a", time.Second}},
			dlock.Info{Held: true, Holds: 3, Readers: 2, TTL: 2 * time.Second}},
		{"no owner and an owner", []hold{{HoldPermit, "", time.Second}, {HoldPermit, "a", time.Second}},
			dlock.Info{Held: true, Holds: 2, TTL: time.Second}},
		{"without owner", []hold{{HoldPermit, "", time.Second}},
			dlock.Info{Held: true, Holds: 1, TTL: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var info dlock.Info
			var tl Tally
			for _, h := range tc.holds {
				tl.Add(&info, h.kind, h.owner, h.ttl)
			}
			if info != tc.want {
				t.Errorf("got %+v; want %+v", info, tc.want)
			}
		})
	}
}
