package redistest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Get(tctx, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("GET on a paused server succeeded")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("after resume GET = %q, want v", got)
	}

	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ScriptFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.EvalSha(ctx, sha, nil).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA after SCRIPT FLUSH: %v, want NOSCRIPT", err)
	}

	port := s.Port()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Port() != port {
		t.Fatalf("restart moved the server from %d to %d", port, s.Port())
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatalf("data survived a restart: EXISTS k = %d", n)
	}

	start := time.Now()
	if err := s.DebugSleep(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("DEBUG SLEEP 0.3 returned after %v", el)
	}

	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after kill succeeded")
	}
}

func TestClusterNodeKeyslot(t *testing.T) {
	s := StartConfig(t, Config{Cluster: true})
	c := s.Client(t)
	slot, err := c.ClusterKeySlot(context.Background(), "{user1000}.following").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := c.ClusterKeySlot(context.Background(), "user1000").Val(); slot != want {
		t.Fatalf("slot of hash-tagged key = %d, want %d", slot, want)
	}
}
