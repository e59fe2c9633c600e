package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/internal/rediswait"
	"github.com/redis/go-redis/v9"
)

// subscribeTimeout bounds how long a waiter waits for its subscription
// before it falls back to its retry timer alone.
const subscribeTimeout = 2 * time.Second

// oneServer is the one target of a client that talks to one server.
var oneServer = []string{""}

// newSubscriber returns the Locker's subscriber. Channels are sharded, as
// the release script publishes with SPUBLISH: in a Cluster a message stays
// on the shard of its key, so a channel is subscribed on the connection
// of the master that serves its slot; on one server (Sentinel's included)
// there is one connection.
func newSubscriber(client redis.UniversalClient, l *Locker) *rediswait.Subscriber {
	cfg := rediswait.Config{
		Targets: 1,
		Route:   func(context.Context, string) ([]string, error) { return oneServer, nil },
		Dial:    func(ctx context.Context, _ string) *redis.PubSub { return client.SSubscribe(ctx) },
		Log:     l.log,
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		cfg.Route = func(ctx context.Context, channel string) ([]string, error) {
			node, err := cc.MasterForKey(ctx, channel)
			if err != nil {
				return nil, err
			}
			return []string{node.Options().Addr}, nil
		}
		cfg.Reload = cc.ReloadState
	}
	return rediswait.New(cfg, subscribeTimeout)
}
