package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member cut off from the others can no longer commit a write, while
// the others can; after Heal it commits again and has what they wrote.
func TestIsolate(t *testing.T) {
	c := StartN(t, 3, WithPartitions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Isolate(l); err != nil {
		t.Fatal(err)
	}
	other := c.Client(t, c.Endpoint((l+1)%3))
	alone := c.Client(t, c.Endpoint(l))
	// A proposal a follower forwarded to the old leader before the
	// majority elected another is lost: the put is tried again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := other.Put(ctx, "k", "majority")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a put on the majority's side: %v", err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = alone.Put(short, "k", "alone")
	cancelShort()
	if err == nil {
		t.Fatal("a put through the isolated member was committed")
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	// Committed again, the isolated member serves what the majority wrote.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := alone.Get(ctx, "k", clientv3.WithSerializable())
		if err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "majority" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Heal, the isolated member has %v (%v)", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := alone.Put(ctx, "k", "healed"); err != nil {
		t.Fatalf("a put through the healed member: %v", err)
	}
}

// A cut between two members drops every connection between them and
// leaves each its links to the third, through which the cluster commits.
func TestPartitionLink(t *testing.T) {
	c := StartN(t, 3, WithPartitions())
	if err := c.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := c.Client(t, c.Endpoint(2))
	for deadline := time.Now().Add(30 * time.Second); ; { // a proposal lost to a change of leader is tried again
		_, err := cli.Put(ctx, "k", "v")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a put through member 2: %v", err)
		}
	}
	links := map[[2]int]bool{}
	c.peers.mu.Lock()
	for _, pc := range c.peers.conns {
		links[[2]int{c.memberByID(pc.from), pc.to}] = true
	}
	c.peers.mu.Unlock()
	if links[[2]int{0, 1}] || links[[2]int{1, 0}] {
		t.Errorf("members 0 and 1 still connected: %v", links)
	}
	for _, l := range [][2]int{{0, 2}, {2, 0}, {1, 2}, {2, 1}} {
		if !links[l] {
			t.Errorf("no connection from member %d to member %d: %v", l[0], l[1], links)
		}
	}
	if err := c.Partition(0, 0); err == nil {
		t.Error("a member partitioned from itself")
	}
	if err := c.Partition(0, 3); err == nil {
		t.Error("a partition from a member that does not exist")
	}
}

// Without WithPartitions, the links cannot be cut: an error, nothing cut.
func TestPartitionNeedsOption(t *testing.T) {
	c := StartN(t, 3)
	for name, err := range map[string]error{"Partition": c.Partition(0, 1), "Isolate": c.Isolate(0), "Heal": c.Heal()} {
		if !errors.Is(err, errNoPartitions) {
			t.Errorf("%s: %v, want %v", name, err, errNoPartitions)
		}
	}
}
