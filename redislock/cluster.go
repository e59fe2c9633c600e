package redislock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// clusterProcessor sends through a Cluster client, and has the client read
// the cluster's topology again when a node does not answer: go-redis
// otherwise keeps sending a slot's commands to a dead master until its
// periodic reload (every 60s by default), long after a replica took over.
type clusterProcessor struct{ cc *redis.ClusterClient }

func (p clusterProcessor) Process(ctx context.Context, cmd redis.Cmder) error {
	err := p.cc.Process(ctx, cmd)
	reloadAfter(p.cc, err)
	return err
}

// reloadAfter asks cc, when it is a Cluster client, to reload its topology
// after err, if err says that a node did not answer: not a reply, not the
// caller's context. The reload happens in the background, at most one at a
// time.
func reloadAfter(client redis.UniversalClient, err error) {
	cc, ok := client.(*redis.ClusterClient)
	if !ok || err == nil || errors.As(err, new(redis.Error)) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	cc.ReloadState(context.Background())
}
