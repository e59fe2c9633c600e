package faults

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a loopback TCP proxy in front of one server, for one worker: it
// can cut the worker off (every connection dropped, new ones refused),
// delay what flows through it, to partition a holder from its store or
// slow it down; lose the replies of the commands it lets through (Redis,
// PostgreSQL: a command is what the client writes at once, a reply what
// the server answers); and, in front of Redis, deliver each command twice
// (see replies): a Redis command means the same on a connection of its
// own, a PostgreSQL statement needs its session.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	delay   time.Duration
	replies replyFault
	hits    int // the commands the reply fault hit since it was set
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// replyFault is what the proxy does to the commands from the worker, each
// a chunk it reads from the worker's side (a command, or a pipeline of
// them).
type replyFault uint8

const (
	// passReplies lets commands and replies through.
	passReplies replyFault = iota
	// loseReplies lets each command through to the server and drops what
	// the server answers, then cuts the connection: a reply lost on the
	// way, as the client sees it. The command took effect; go-redis sends
	// it again on a new connection (and the proxy loses that reply too,
	// while the fault lasts).
	loseReplies
	// repeatCommands delivers each command twice: first on a connection
	// of its own, whose reply is dropped, then on the worker's. That is
	// what the server sees when a client sends a command again after its
	// reply timed out.
	repeatCommands
)

func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			continue
		}
		l := &link{client: c, server: s}
		p.wg.Go(func() { p.pipe(s, c, l.fromClient) })
		p.wg.Go(func() { p.pipe(c, s, l.fromServer) })
	}
}

// link is a worker's connection to the server through the proxy.
type link struct {
	client, server net.Conn
	losing         atomic.Bool // the server's next words are lost, and then the connection
}

// track records a connection pair, or closes it when the proxy was cut
// meanwhile.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// fromClient runs the reply fault in force on a chunk from the client,
// before it goes to the server; it reports whether the chunk goes on.
func (l *link) fromClient(p *proxy, chunk []byte) bool {
	p.mu.Lock()
	f := p.replies
	if f != passReplies {
		p.hits++
	}
	p.mu.Unlock()
	switch f {
	case loseReplies:
		l.losing.Store(true)
	case repeatCommands:
		p.deliver(chunk)
	}
	return true
}

// fromServer drops a chunk from the server while the link is losing its
// replies, and cuts the link then.
func (l *link) fromServer(p *proxy, chunk []byte) bool {
	if l.losing.Load() {
		l.client.Close()
		l.server.Close()
		return false
	}
	return true
}

// deliver sends chunk to the server on a connection of its own, waits for
// the beginning of the answer (a second at most) and drops it.
func (p *proxy) deliver(chunk []byte) {
	c, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(chunk); err != nil {
		return
	}
	var b [512]byte
	c.Read(b[:])
}

// pipe copies from src to dst, each chunk after the delay in force, and
// each that pass lets through.
func (p *proxy) pipe(dst, src net.Conn, pass func(*proxy, []byte) bool) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d) // the fault: a slow network
			}
			if !pass(p, buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: the other side closes too
		}
	}
}

// setCut drops every connection and refuses new ones (true), or lets them
// through again (false).
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// setReplies sets the reply fault from now on, and returns how many
// commands the one it replaces hit.
func (p *proxy) setReplies(f replyFault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	hits := p.hits
	p.replies, p.hits = f, 0
	return hits
}

// setDelay delays every chunk by d from now on (0: none).
func (p *proxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}
