package pgtest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards loopback TCP connections to a server, and can lose the
// reply of a statement: once armed with a marker, the first statement
// whose bytes contain it is forwarded to the server, which runs it, and
// the connection is cut when the reply comes, which is dropped. The
// client sees its connection fail, not knowing whether the statement ran.
type Proxy struct {
	ln     net.Listener
	target string
	marker atomic.Pointer[[]byte]
	cut    chan struct{} // a value per reply dropped
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy starts a proxy to target (host:port) on a free loopback port.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, cut: make(chan struct{}, 16), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReplyTo arms the proxy: the reply to the next statement containing
// marker is lost, and its connection cut.
func (p *Proxy) DropReplyTo(marker string) {
	b := []byte(marker)
	p.marker.Store(&b)
}

// Dropped receives a value each time a reply was dropped.
func (p *Proxy) Dropped() <-chan struct{} { return p.cut }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.closed:
		c.Close()
	case on:
		p.conns[c] = struct{}{}
	default:
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, true)
		p.track(s, true)
		var doomed atomic.Bool
		p.wg.Go(func() { p.up(c, s, &doomed) })
		p.wg.Go(func() { p.down(s, c, &doomed) })
	}
}

// up forwards the client's bytes, and marks the connection doomed when a
// chunk carries the armed marker.
func (p *Proxy) up(c, s net.Conn, doomed *atomic.Bool) {
	defer func() { s.Close(); p.track(s, false) }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if m := p.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && p.marker.CompareAndSwap(m, nil) {
				doomed.Store(true)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down forwards the server's bytes, unless the connection is doomed: then
// the reply is dropped and both sides are cut.
func (p *Proxy) down(s, c net.Conn, doomed *atomic.Bool) {
	defer func() { c.Close(); p.track(c, false) }()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && doomed.Load() {
			s.Close()
			select {
			case p.cut <- struct{}{}:
			default:
			}
			return
		}
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
