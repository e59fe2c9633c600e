package redistest

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Proxy forwards TCP connections from a loopback port to one server. Cut
// stands for a client whose process died or was partitioned from the
// server: it drops every open connection and refuses new ones, so that
// nothing the client sends reaches the server any more, while the server
// and its other clients go on.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to s that is closed when t ends.
func StartProxy(t TB, s *Server) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: s.Addr(), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Client returns a client that reaches the server through the proxy,
// closed when t ends. It does not retry a command that failed, so that a
// cut is seen at once.
func (p *Proxy) Client(t TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// Cut drops every connection and refuses new ones for good.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// track records c, or closes it when the proxy was cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if !p.track(in) {
			continue
		}
		p.wg.Go(func() {
			defer p.untrack(in)
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			if !p.track(out) {
				return
			}
			defer p.untrack(out)
			done := make(chan struct{}, 2)
			go func() { io.Copy(out, in); done <- struct{}{} }()
			go func() { io.Copy(in, out); done <- struct{}{} }()
			<-done
			in.Close()
			out.Close()
			<-done
		})
	}
}
