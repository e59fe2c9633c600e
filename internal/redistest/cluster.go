package redistest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNode is the configuration of every Cluster node the harness
// starts: a node is judged failed after a second without a reply, and a
// replica may take over however stale its data.
var ClusterNode = Config{Cluster: true, Extra: []string{
	"cluster-node-timeout 1000", "cluster-replica-validity-factor 0", "repl-diskless-sync-delay 0",
}}

// Cluster is a Redis Cluster on loopback: master i serves the i-th equal
// range of the 16384 slots, and replica i, if there is one, replicates
// master i. Roles change with failovers; the slices keep the order of the
// start.
type Cluster struct {
	Masters  []*Server
	Replicas []*Server
}

// StartCluster starts a Cluster of masters masters, the first replicas of
// which have a replica each, and waits until every node sees every slot
// served. It stops every node when t ends.
func StartCluster(t TB, masters, replicas int) *Cluster {
	t.Helper()
	c, err := NewCluster(t.TempDir(), masters, replicas)
	return started(t, c, err)
}

// NewCluster is StartCluster with the files under dir; the caller must
// call Close.
func NewCluster(dir string, masters, replicas int) (_ *Cluster, err error) {
	if masters < 1 || replicas < 0 || replicas > masters {
		return nil, fmt.Errorf("redistest: a Cluster of %d masters cannot have %d replicas", masters, replicas)
	}
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	start := func(name string) (*Server, error) { return New(filepath.Join(dir, name), ClusterNode) }
	for i := range masters {
		s, err := start("m" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		c.Masters = append(c.Masters, s)
	}
	for i := range replicas {
		s, err := start("r" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		c.Replicas = append(c.Replicas, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for i, n := range c.Masters {
		lo, hi := c.Slots(i)
		if err := do(ctx, n, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes()[1:] {
		if err := do(ctx, c.Masters[0], "CLUSTER", "MEET", "127.0.0.1", n.Port()); err != nil {
			return nil, err
		}
	}
	for i, r := range c.Replicas {
		id, err := NodeID(ctx, c.Masters[i])
		if err != nil {
			return nil, err
		}
		if err := Poll(ctx, func() error { return do(ctx, r, "CLUSTER", "REPLICATE", id) }); err != nil {
			return nil, fmt.Errorf("a replica does not know its master: %w", err)
		}
		if err := Poll(ctx, func() error { return linkUp(ctx, r) }); err != nil {
			return nil, err
		}
	}
	if err := c.Settle(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Nodes lists every node: the masters, then the replicas, in the order of
// the start.
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server{}, c.Masters...), c.Replicas...)
}

// Slots is the range of slots master i was given at the start.
func (c *Cluster) Slots(i int) (lo, hi int) {
	n := len(c.Masters)
	return i * 16384 / n, (i+1)*16384/n - 1
}

// Options returns Cluster client options that know every node, with
// short timeouts that suit tests.
func (c *Cluster) Options() *redis.ClusterOptions {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr())
	}
	return &redis.ClusterOptions{Addrs: addrs, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}

// Client returns a new Cluster client, closed when t ends.
func (c *Cluster) Client(t TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Settle waits until every node that runs sees the cluster as ok, every
// slot served and every other running node known.
func (c *Cluster) Settle(ctx context.Context) error {
	var running []*Server
	for _, n := range c.Nodes() {
		if n.running() {
			running = append(running, n)
		}
	}
	for _, n := range running {
		err := Poll(ctx, func() error {
			info, err := command(ctx, n, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			s := fmt.Sprint(info)
			if !strings.Contains(s, "cluster_state:ok") || !strings.Contains(s, "cluster_slots_ok:16384") {
				return fmt.Errorf("node %s: not every slot is served", n.Addr())
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("the cluster did not settle: %w", err)
		}
	}
	want := len(running)
	for _, n := range running {
		err := Poll(ctx, func() error {
			nodes, err := command(ctx, n, "CLUSTER", "NODES")
			if err != nil {
				return err
			}
			alive := 0
			for _, line := range strings.Split(strings.TrimSpace(fmt.Sprint(nodes)), "\n") {
				if !strings.Contains(line, "fail") && !strings.Contains(line, "noaddr") {
					alive++
				}
			}
			if alive < want {
				return fmt.Errorf("node %s sees %d healthy nodes of %d", n.Addr(), alive, want)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("the cluster did not settle: %w", err)
		}
	}
	return nil
}

// Role is a node's ROLE: "master" or "slave".
func Role(ctx context.Context, n *Server) (string, error) { return role(ctx, n) }

// NodeID is a node's Cluster ID.
func NodeID(ctx context.Context, n *Server) (string, error) {
	id, err := command(ctx, n, "CLUSTER", "MYID")
	if err != nil {
		return "", err
	}
	s, _ := id.(string)
	return s, nil
}

// Migrate moves slot s, with its keys, from master from to master to (as
// indexes of Masters), as redis-cli --cluster reshard does. between, when
// not nil, is called in the middle: with "migrating" once the slot is
// migrating, and with "keys moved" once its keys have moved.
func (c *Cluster) Migrate(ctx context.Context, s, from, to int, between func(stage string)) error {
	src, dst := c.Masters[from], c.Masters[to]
	srcID, err := NodeID(ctx, src)
	if err != nil {
		return err
	}
	dstID, err := NodeID(ctx, dst)
	if err != nil {
		return err
	}
	if err := do(ctx, dst, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID); err != nil {
		return err
	}
	if err := do(ctx, src, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID); err != nil {
		return err
	}
	if between != nil {
		between("migrating")
	}
	keys, err := command(ctx, src, "CLUSTER", "GETKEYSINSLOT", s, 1000)
	if err != nil {
		return err
	}
	if ks, _ := keys.([]any); len(ks) > 0 {
		args := append([]any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, 5000, "KEYS"}, ks...)
		if err := do(ctx, src, args...); err != nil {
			return err
		}
	}
	if between != nil {
		between("keys moved")
	}
	order := []*Server{dst, src}
	for _, n := range c.Masters {
		if n != src && n != dst {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if err := do(ctx, n, "CLUSTER", "SETSLOT", s, "NODE", dstID); err != nil {
			return err
		}
	}
	return nil
}

// Failover makes replica i take over from its master with CLUSTER
// FAILOVER (a clean failover: the master stops taking writes until the
// replica has them all), and waits until both have changed roles.
func (c *Cluster) Failover(ctx context.Context, i int) error {
	r, m := c.Replicas[i], c.Masters[i]
	if err := do(ctx, r, "CLUSTER", "FAILOVER"); err != nil {
		return err
	}
	return Poll(ctx, func() error {
		if got, err := role(ctx, r); err != nil || got != "master" {
			return fmt.Errorf("replica %d is %q (%v), not yet master", i, got, err)
		}
		if got, err := role(ctx, m); err != nil || got != "slave" {
			return fmt.Errorf("master %d is %q (%v), not yet a replica", i, got, err)
		}
		return nil
	})
}

// KillMaster kills master i with SIGKILL and waits until its replica has
// taken over, when it has one.
func (c *Cluster) KillMaster(ctx context.Context, i int) error {
	c.Masters[i].Kill()
	if i >= len(c.Replicas) {
		return nil
	}
	r := c.Replicas[i]
	return Poll(ctx, func() error {
		if got, err := role(ctx, r); err != nil || got != "master" {
			return fmt.Errorf("replica %d is %q (%v), not yet master", i, got, err)
		}
		return nil
	})
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes() {
		n.Close()
	}
}

// command sends one command to n on a connection of its own.
func command(ctx context.Context, n *Server, args ...any) (any, error) {
	cli := redis.NewClient(n.Options())
	defer cli.Close()
	return cli.Do(ctx, args...).Result()
}

func do(ctx context.Context, n *Server, args ...any) error {
	_, err := command(ctx, n, args...)
	return err
}

// linkUp reports whether replica r's link to its master is up.
func linkUp(ctx context.Context, r *Server) error {
	info, err := command(ctx, r, "INFO", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(fmt.Sprint(info), "master_link_status:up") {
		return errors.New("the replica's link to its master is down")
	}
	return nil
}
