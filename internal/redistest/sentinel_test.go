package redistest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Sentinel group fails over on request and when its master dies, and a
// failover client follows it; a killed master rejoins as a replica.
func TestSentinel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := StartSentinel(t, 1, 3)
	c := g.Client(t)
	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("Failover kept the master")
	}
	if err := g.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := role(ctx, first); err != nil || r != "slave" {
		t.Fatalf("the old master says role %q, %v; want slave", r, err)
	}
	// The failover client reaches the new master, which has the data.
	if err := Poll(ctx, func() error { return c.Set(ctx, "k2", "2", 0).Err() }); err != nil {
		t.Fatalf("writes after the failover: %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "1" {
		t.Fatalf("GET k after the failover: %q, %v", v, err)
	}

	killed, third, err := g.KillMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if killed != second || third != first {
		t.Fatalf("KillMaster killed %s and promoted %s; want %s and %s", killed.Addr(), third.Addr(), second.Addr(), first.Addr())
	}
	if err := Poll(ctx, func() error { return c.Set(ctx, "k3", "3", 0).Err() }); err != nil {
		t.Fatalf("writes after the kill: %v", err)
	}
	if err := g.Rejoin(ctx, killed); err != nil {
		t.Fatal(err)
	}
	if r, err := role(ctx, killed); err != nil || r != "slave" {
		t.Fatalf("the rejoined server says role %q, %v; want slave", r, err)
	}

	g.Close()
	for _, s := range append(g.sentinels, g.data...) {
		if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", s.Addr())
		}
	}
}

// A group that cannot start returns the error and stops what it started:
// here its Sentinel's directory cannot be made, after its servers started.
func TestNewSentinelFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sentinel0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := NewSentinel(dir, 1, 1)
	if err == nil || g != nil {
		t.Fatalf("NewSentinel over a file where a directory must be: %v, %v", g, err)
	}
}
