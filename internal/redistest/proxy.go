package redistest

import (
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/proxy"
)

// Proxy forwards TCP connections from a loopback port to one server. Cut
// stands for a client whose process died or was partitioned from the
// server: it drops every open connection and refuses new ones, so that
// nothing the client sends reaches the server any more, while the server
// and its other clients go on.
type Proxy struct{ p *proxy.Proxy }

// StartProxy starts a proxy to s that is closed when t ends.
func StartProxy(t TB, s *Server) *Proxy {
	t.Helper()
	p, err := proxy.Start(s.Addr())
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p}
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.p.Addr() }

// Client returns a client that reaches the server through the proxy,
// closed when t ends. It does not retry a command that failed, so that a
// cut is seen at once.
func (p *Proxy) Client(t TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// Cut drops every connection and refuses new ones for good.
func (p *Proxy) Cut() { p.p.Cut() }

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() { p.p.Close() }
