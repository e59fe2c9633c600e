// Package proxy forwards TCP connections from a loopback port to one
// server, for the test harnesses: cutting a proxy stands for a network
// partition between the clients behind it and the server.
package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to one target. Cut
// drops every open connection and refuses new ones until Heal.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start starts a proxy to target (host:port). The caller closes it.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// track records c, or closes it when the proxy is cut.
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
			Splice(in, out, func() { io.Copy(out, in) })
		})
	}
}

// Splice runs up, which copies from in to out, beside a copy from out
// back to in. When either direction ends it closes both connections, and
// it returns when both directions have.
func Splice(in, out net.Conn, up func()) {
	done := make(chan struct{}, 2)
	go func() { up(); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done
	in.Close()
	out.Close()
	<-done
}
