package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// clusterEnv is a Redis Cluster of two masters, each with a replica,
// and where the run's lock key is served: roles change with failovers,
// and the slot moves between the pairs (a master and its replica, by
// their index in redistest.Cluster).
type clusterEnv struct {
	c     *redistest.Cluster
	slot  int // the lock key's slot
	owner int // the pair that serves it
}

// startCluster starts the cluster of a run whose workers lock key with
// prefix. A cluster whose nodes did not meet in time (a loaded machine
// runs them late) is started again, three times at most.
func startCluster(dir, prefix, key string) (*clusterEnv, error) {
	var c *redistest.Cluster
	var err error
	for try := range 3 {
		if c, err = redistest.NewCluster(filepath.Join(dir, strconv.Itoa(try)), 2, 2); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	slot := int(redisnode.Slot(prefix + ":lock:" + key))
	return &clusterEnv{c: c, slot: slot, owner: slot * len(c.Masters) / 16384}, nil
}

// master returns the node of pair i that is its master now, and the other.
func (e *clusterEnv) master(ctx context.Context, i int) (master, replica *redistest.Server, err error) {
	a, b := e.c.Masters[i], e.c.Replicas[i]
	role, err := redistest.Role(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	if role == "master" {
		return a, b, nil
	}
	return b, a, nil
}

// failover makes the replica of the pair that serves the lock key take
// over (CLUSTER FAILOVER: the master stops taking writes until the replica
// has them all), and waits until every node sees the cluster whole again.
func (e *clusterEnv) failover(ctx context.Context) (string, error) {
	m, r, err := e.master(ctx, e.owner)
	if err != nil {
		return "", err
	}
	target := fmt.Sprintf("pair %d (%s takes over from %s)", e.owner, r.Addr(), m.Addr())
	if err := nodeDo(ctx, r, "CLUSTER", "FAILOVER"); err != nil {
		return target, err
	}
	err = redistest.Poll(ctx, func() error {
		if got, err := redistest.Role(ctx, r); err != nil || got != "master" {
			return fmt.Errorf("%s is %q (%v), not yet master", r.Addr(), got, err)
		}
		if got, err := redistest.Role(ctx, m); err != nil || got != "slave" {
			return fmt.Errorf("%s is %q (%v), not yet a replica", m.Addr(), got, err)
		}
		return nil
	})
	if err == nil {
		err = e.c.Settle(ctx)
	}
	return target, err
}

// migrate moves the lock key's slot, with its keys, to another pair, as
// redis-cli --cluster reshard does: the slot is marked importing and
// migrating, its keys are moved (MIGRATE, each with its TTL), and every
// master is told its new owner.
func (e *clusterEnv) migrate(ctx context.Context, to int) (string, error) {
	src, _, err := e.master(ctx, e.owner)
	if err != nil {
		return "", err
	}
	dst, _, err := e.master(ctx, to)
	if err != nil {
		return "", err
	}
	target := fmt.Sprintf("slot %d from pair %d to pair %d", e.slot, e.owner, to)
	srcID, err := redistest.NodeID(ctx, src)
	if err != nil {
		return target, err
	}
	dstID, err := redistest.NodeID(ctx, dst)
	if err != nil {
		return target, err
	}
	if err := nodeDo(ctx, dst, "CLUSTER", "SETSLOT", e.slot, "IMPORTING", srcID); err != nil {
		return target, err
	}
	if err := nodeDo(ctx, src, "CLUSTER", "SETSLOT", e.slot, "MIGRATING", dstID); err != nil {
		return target, err
	}
	for {
		keys, err := nodeCommand(ctx, src, "CLUSTER", "GETKEYSINSLOT", e.slot, 100)
		if err != nil {
			return target, err
		}
		ks, _ := keys.([]any)
		if len(ks) == 0 {
			break
		}
		args := append([]any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, 5000, "KEYS"}, ks...)
		if err := nodeDo(ctx, src, args...); err != nil {
			return target, err
		}
	}
	masters := []*redistest.Server{dst, src}
	for i := range e.c.Masters {
		if i != e.owner && i != to {
			m, _, err := e.master(ctx, i)
			if err != nil {
				return target, err
			}
			masters = append(masters, m)
		}
	}
	for _, m := range masters {
		if err := nodeDo(ctx, m, "CLUSTER", "SETSLOT", e.slot, "NODE", dstID); err != nil {
			return target, err
		}
	}
	e.owner = to
	return target, e.c.Settle(ctx)
}

func (e *clusterEnv) addrs() []string {
	var as []string
	for _, n := range e.c.Nodes() {
		as = append(as, n.Addr())
	}
	return as
}

func (e *clusterEnv) close() { e.c.Close() }

// nodeCommand sends one command to n on a connection of its own.
func nodeCommand(ctx context.Context, n *redistest.Server, args ...any) (any, error) {
	cli := redis.NewClient(n.Options())
	defer cli.Close()
	return cli.Do(ctx, args...).Result()
}

func nodeDo(ctx context.Context, n *redistest.Server, args ...any) error {
	_, err := nodeCommand(ctx, n, args...)
	return err
}
