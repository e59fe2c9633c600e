package redistest

import (
	"context"
	"testing"
)

// A cut proxy lets nothing through, and refuses new connections, while
// the server goes on for its other clients.
func TestProxyCut(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	p := StartProxy(t, s)
	via := p.Client(t)
	if err := via.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	p.Cut()
	if err := via.Get(ctx, "k").Err(); err == nil {
		t.Fatal("GET through a cut proxy succeeded")
	}
	if err := via.Set(ctx, "k", "w", 0).Err(); err == nil {
		t.Fatal("SET through a cut proxy succeeded")
	}
	if got := s.Client(t).Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("GET from the server = %q, want v (and nothing from the cut client)", got)
	}
}
