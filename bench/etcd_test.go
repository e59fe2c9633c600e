package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdCounter checks the etcd measures on an embedded member: a unary
// call is one round trip, a watch created and cancelled is two messages on
// its stream, and a put is one revision while a read is none.
func TestEtcdCounter(t *testing.T) {
	c := etcdtest.Start(t)
	tg := etcdTarget(c, c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rtt counter
	cli, err := newEtcdClient(tg.endpoint(0), &rtt)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	rtt.reset()
	s0, err := tg.stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	s1, err := tg.stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := rtt.n.Load(); n != 2 {
		t.Errorf("a put and a get: %d round trips, want 2", n)
	}
	if d := s1.sub(s0).rev; d != 1 {
		t.Errorf("a put and a get: %d revisions, want 1", d)
	}

	// A watch that stays keeps the stream open, so that the client sends
	// the cancel of the second one (the last watch of a stream closes it
	// instead).
	stay := cli.Watch(ctx, "stay", clientv3.WithCreatedNotify())
	if resp := <-stay; !resp.Created {
		t.Fatalf("watch: %+v, want the created notification", resp)
	}
	rtt.reset()
	wctx, wcancel := context.WithCancel(ctx)
	wch := cli.Watch(wctx, "k", clientv3.WithCreatedNotify())
	if resp := <-wch; !resp.Created {
		t.Fatalf("watch: %+v, want the created notification", resp)
	}
	wcancel()
	for range wch { // closed once the watch is cancelled
	}
	deadline := time.Now().Add(5 * time.Second)
	for rtt.n.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := rtt.n.Load(); n != 2 {
		t.Errorf("a watch created and cancelled: %d round trips, want 2", n)
	}
}
