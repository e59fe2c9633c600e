package faults

import (
	"context"
	"testing"
	"time"
)

// A worker whose network is slow (slow-holder, or a harness the machine
// does not run for a while: the proxies are in it) still connects to
// PostgreSQL, whose connection takes a round trip more than a command:
// a connection is bounded by the caller's context, not by a second.
func TestPostgresWorkerSlowNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg, err := startPostgres()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	p, err := startProxy(pg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.setDelay(600 * time.Millisecond) // each way: a connection's start takes 1.2s
	l, closeLocker, err := newLocker(workerConfig{Backend: "postgres", Addrs: []string{p.addr()}, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLocker()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := l.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("TryLock over a network 600ms slow each way: %v; want the lock", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
