package main

import (
	"context"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// endpoint is what a party connects to: a redis-server (the options of its
// go-redis client, whose address the other Redis clients use too), a Redis
// Cluster (the options of its go-redis Cluster client) or an etcd cluster
// (the configuration of its client).
type endpoint struct {
	redis   *redis.Options
	cluster *redis.ClusterOptions
	etcd    *clientv3.Config
}

// A target is the server of one part: how a party reaches it, and how the
// server's own counters are read.
type target struct {
	// endpoint returns a fresh endpoint whose clients keep pool
	// connections (0: the part's default).
	endpoint func(pool int) endpoint
	// stats reads the server's counters, which a meter subtracts.
	stats func(ctx context.Context) (serverStats, error)
	// hotPrefix starts the hot key's name (default "bench:hot:"): on a
	// Cluster, a hash tag picks the shard.
	hotPrefix string
}

// redisTarget is the redis-server at addr, read through admin.
func redisTarget(addr string, admin *redis.Client) *target {
	return &target{
		endpoint: func(pool int) endpoint {
			o := clientOptions(addr)
			if pool > 0 {
				o.PoolSize = pool
			}
			return endpoint{redis: o}
		},
		stats: func(ctx context.Context) (serverStats, error) { return readStats(ctx, admin) },
	}
}
