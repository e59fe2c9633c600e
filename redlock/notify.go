package redlock

import (
	"context"
	"strconv"

	"github.com/dlock-go/dlock/internal/rediswait"
	"github.com/redis/go-redis/v9"
)

// newSubscriber returns the Locker's subscriber: a channel is subscribed
// on every node, one connection per node for all its channels, and a
// wake-up names the node whose release sent it. A release on a node hands
// the lock to the first live waiter queued there and publishes
// "<token> <attempt> <fence>" on the channel of that waiter's Locker for
// the key ("<queue key>:<subscriber id>"), so only that waiter's Locker
// hears it. A waiter waits for its subscription no longer than its own
// bound.
func newSubscriber(l *Locker) *rediswait.Subscriber {
	all := make([]string, len(l.nodes))
	for i := range all {
		all[i] = strconv.Itoa(i)
	}
	return rediswait.New(rediswait.Config{
		Targets: len(l.nodes),
		Route:   func(context.Context, string) ([]string, error) { return all, nil },
		Dial: func(ctx context.Context, target string) *redis.PubSub {
			i, _ := strconv.Atoi(target)
			return l.nodes[i].client.SSubscribe(ctx)
		},
		Log: l.log,
	}, 0)
}
