package redlock

import (
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
)

// RestartDelay is how long a node that restarted without its data (no
// persistence, or a persistence that lost its last writes) must stay out
// of reach before it takes part again, for locks whose leases are at
// most maxTTL: one lease and its drift margin. Start the server that
// late, or keep clients away from it as long (a firewall rule, a
// supervisor's start delay).
//
// The rule is Redlock's: a node that forgot a lock could grant it again
// while the old holder still holds a majority with it; after maxTTL every
// lock it knew of has expired on the other nodes too. It also keeps the
// fences rising: a node whose counter is gone starts it again at the
// acquiring client's clock, in microseconds, which is then past every
// fence handed out before the node restarted, provided that the clocks of
// the clients differ by less than half the delay and that a key is not
// acquired more than a million times a second.
func RestartDelay(maxTTL time.Duration) time.Duration {
	return maxTTL + redisnode.Drift.Of(maxTTL)
}
