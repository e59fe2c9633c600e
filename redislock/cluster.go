package redislock

import (
	"context"
	"errors"
	"sync"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// newProcessor returns what a Locker sends its commands through: a
// coalescer for a client of one server (a *redis.Client, which Sentinel's
// failover client is too); for a Cluster client, a coalescer per master
// (see clusterProcessor), since a cluster pipeline waits for its slowest
// node, and one stalled node would hold up commands for every other.
func newProcessor(client redis.UniversalClient) redisnode.Processor {
	if cc, ok := client.(*redis.ClusterClient); ok {
		return &clusterProcessor{cc: cc, nodes: map[*redis.Client]*redisnode.Coalescer{}}
	}
	c, ok := client.(*redis.Client)
	if !ok {
		return client
	}
	return redisnode.NewCoalescer(c)
}

// clusterProcessor sends a command to the master of its key's slot
// through that master's coalescer, so that a Locker's goroutines share
// round trips with each master as they do with one server, and a stalled
// master holds up only its own commands. A command that a master refuses
// as not its own (MOVED, ASK: a slot migrates or moved; TRYAGAIN,
// CLUSTERDOWN: a failover or a migration is under way), or sent to a node
// the client has dropped, is sent again through the client, which follows
// redirects and retries; none of these refusals ran the command.
//
// A node that does not answer makes the client read the cluster's
// topology again: go-redis otherwise keeps sending a slot's commands to a
// dead master until its periodic reload (every 60s by default), long
// after a replica took over.
type clusterProcessor struct {
	cc *redis.ClusterClient

	mu    sync.Mutex
	nodes map[*redis.Client]*redisnode.Coalescer // by the client's node client of a master
}

func (p *clusterProcessor) Process(ctx context.Context, cmd redis.Cmder) error {
	node, err := p.cc.MasterForKey(ctx, firstKey(cmd.Args()))
	if err == nil {
		err = p.coalescer(node).Process(ctx, cmd)
		if !resend(err) || ctx.Err() != nil {
			reloadAfter(p.cc, err)
			return err
		}
		if errors.Is(err, redis.ErrClosed) {
			p.drop(node)
		}
	}
	err = p.cc.Process(ctx, cmd)
	reloadAfter(p.cc, err)
	return err
}

// coalescer returns the coalescer of node, made on first use.
func (p *clusterProcessor) coalescer(node *redis.Client) *redisnode.Coalescer {
	p.mu.Lock()
	defer p.mu.Unlock()
	co := p.nodes[node]
	if co == nil {
		co = redisnode.NewCoalescer(node)
		p.nodes[node] = co
	}
	return co
}

// drop forgets the coalescer of a node client that the Cluster client
// closed: the node left the topology.
func (p *clusterProcessor) drop(node *redis.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, node)
}

// resend reports whether a command sent to a master directly is to be
// sent again through the Cluster client: the master refused it as another
// node's, or for a failover or migration under way, or the node client
// was closed.
func resend(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, redis.ErrClosed) {
		return true
	}
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// reloadAfter asks cc, when it is a Cluster client, to reload its topology
// after err, if err says that a node did not answer (not a reply, not the
// caller's context) or that a slot moved (MOVED, to a command sent to a
// node directly rather than through the client, which would follow it).
// The reload happens in the background, at most one at a time.
func reloadAfter(client redis.UniversalClient, err error) {
	cc, ok := client.(*redis.ClusterClient)
	if !ok || err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if errors.As(err, new(redis.Error)) && !redis.HasErrorPrefix(err, "MOVED") {
		return
	}
	cc.ReloadState(context.Background())
}
