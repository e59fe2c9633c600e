package etcdtest

import (
	"testing"

	"github.com/dlock-go/dlock/internal/proxy"
)

// Proxy forwards TCP connections from a loopback port to one target. Cut
// simulates a network partition: it drops every open connection and
// refuses new ones until Heal.
type Proxy struct{ p *proxy.Proxy }

// StartProxy starts a proxy to target that is closed when t ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := proxy.Start(target)
	if err != nil {
		t.Fatalf("etcdtest: proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p}
}

// Addr returns the proxy's address, as "http://127.0.0.1:port" for a
// client's endpoint list.
func (p *Proxy) Addr() string { return "http://" + p.p.Addr() }

// Cut drops every connection and refuses new ones until Heal.
func (p *Proxy) Cut() { p.p.Cut() }

// Heal lets connections through again.
func (p *Proxy) Heal() { p.p.Heal() }

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() { p.p.Close() }
