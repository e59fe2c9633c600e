package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cluster serves every slot; a slot migrates with its keys; a replica
// takes over from its master on request and when the master dies.
func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := StartCluster(t, 3, 2) // a failover needs a majority of masters alive
	cc := c.Client(t)
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s := int(cc.ClusterKeySlot(ctx, "k").Val())
	from := 0
	for i := range c.Masters {
		if lo, hi := c.Slots(i); s >= lo && s <= hi {
			from = i
		}
	}
	to := (from + 1) % len(c.Masters)
	stages := 0
	if err := c.Migrate(ctx, s, from, to, func(string) { stages++ }); err != nil {
		t.Fatal(err)
	}
	if stages != 2 {
		t.Errorf("Migrate called between %d times, want 2", stages)
	}
	moved := redis.NewClient(c.Masters[to].Options())
	defer moved.Close()
	if v, err := moved.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("the key on the slot's new master: %q, %v", v, err)
	}

	if err := c.Failover(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := Role(ctx, c.Masters[0]); err != nil || r != "slave" {
		t.Fatalf("after Failover the old master is %q, %v", r, err)
	}
	if err := c.KillMaster(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	cc = c.Client(t) // go-redis reads the new topology in its own time (60s)
	if err := Poll(ctx, func() error { return cc.Set(ctx, "k", "w", 0).Err() }); err != nil {
		t.Fatalf("writes after the failovers: %v", err)
	}
	if _, err := NewCluster(t.TempDir(), 1, 2); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("a Cluster of 1 master with 2 replicas: %v, want an error", err)
	}
}
