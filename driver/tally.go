package driver

import (
	"time"

	"github.com/dlock-go/dlock"
)

// A Tally folds the live holds of one key into its dlock.Info: how many
// there are, how many of them are read locks, the longest remaining
// lease, and the owner when every hold has the same one. Its zero value
// is an empty tally.
type Tally struct {
	owner  string
	owners int // distinct owners, counted up to 2
}

// Add counts one live hold of kind, by owner, with ttl of its lease left.
func (t *Tally) Add(info *dlock.Info, kind HoldKind, owner string, ttl time.Duration) {
	info.Held = true
	info.Holds++
	if kind == HoldRead {
		info.Readers++
	}
	info.TTL = max(info.TTL, ttl)
	switch {
	case t.owners == 0:
		t.owner, t.owners = owner, 1
	case t.owners == 1 && owner != t.owner:
		t.owners = 2
	}
	if t.owners == 1 {
		info.Owner = t.owner
	} else {
		info.Owner = ""
	}
}
