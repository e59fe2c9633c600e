package etcdtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/internal/proxy"
)

// An Option changes how New starts a cluster.
type Option func(*options)

type options struct {
	partitions bool
}

// WithPartitions puts each member's peer port behind a proxy of the
// cluster's, so that Partition, Isolate and Heal can cut and restore the
// links between members. Clients reach the members as without it.
func WithPartitions() Option { return func(o *options) { o.partitions = true } }

// errNoPartitions is what Partition returns on a cluster started without
// WithPartitions.
var errNoPartitions = errors.New("etcdtest: the cluster was started without WithPartitions")

// Partition cuts the link between members i and j, both ways: their open
// connections are dropped and new ones refused until Heal. Each still
// reaches the other members.
func (c *Cluster) Partition(i, j int) error {
	if c.peers == nil {
		return errNoPartitions
	}
	if i < 0 || j < 0 || i >= len(c.members) || j >= len(c.members) || i == j {
		return fmt.Errorf("etcdtest: no link between members %d and %d of %d", i, j, len(c.members))
	}
	c.peers.cut(i, j)
	return nil
}

// Isolate cuts member i off from every other member (see Partition). Its
// clients still reach it.
func (c *Cluster) Isolate(i int) error {
	for j := range c.members {
		if j == i {
			continue
		}
		if err := c.Partition(i, j); err != nil {
			return err
		}
	}
	return nil
}

// Heal restores every link Partition and Isolate cut.
func (c *Cluster) Heal() error {
	if c.peers == nil {
		return errNoPartitions
	}
	c.peers.heal()
	return nil
}

// peerNet is the proxies in front of the members' peer ports. A member
// dials another's advertised peer URL, which is the other's proxy; the
// proxy learns who dialled from the X-Server-From header every request
// between members carries (raft's streams and pipelines), and refuses a
// connection over a link that is cut.
type peerNet struct {
	c *Cluster

	mu      sync.Mutex
	blocked map[[2]int]bool // {from, to}, both ways
	conns   map[net.Conn]peerConn
	lns     []net.Listener
	wg      sync.WaitGroup
}

// peerConn is a connection the proxy of member to forwards, from the
// member whose id it read ("": not a member's request). The id is matched
// to a member when a link is cut: connections open before every member
// knew its id are cut too.
type peerConn struct {
	from string
	to   int
}

func newPeerNet(c *Cluster) *peerNet {
	return &peerNet{c: c, blocked: map[[2]int]bool{}, conns: map[net.Conn]peerConn{}}
}

// listen starts the proxy of member i on ln, forwarding to target.
func (p *peerNet) listen(i int, ln net.Listener, target string) {
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			p.wg.Go(func() { p.forward(in, i, target) })
		}
	})
}

func (p *peerNet) cut(i, j int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[[2]int{i, j}], p.blocked[[2]int{j, i}] = true, true
	for conn, pc := range p.conns {
		if p.blocked[[2]int{p.c.memberByID(pc.from), pc.to}] {
			conn.Close()
		}
	}
}

func (p *peerNet) heal() {
	p.mu.Lock()
	clear(p.blocked)
	p.mu.Unlock()
}

// track records conn from member from to member to, unless their link is
// cut (then it closes conn).
func (p *peerNet) track(conn net.Conn, from string, to int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked[[2]int{p.c.memberByID(from), to}] || p.lns == nil {
		conn.Close()
		return false
	}
	p.conns[conn] = peerConn{from, to}
	return true
}

func (p *peerNet) untrack(conn net.Conn) {
	p.mu.Lock()
	delete(p.conns, conn)
	p.mu.Unlock()
	conn.Close()
}

// forward copies the requests on in to member to's peer port, and the
// replies back. It reads each request's head before it passes it on: a
// connection is its first request's, but one a member opened to probe a
// peer (without X-Server-From) may carry its raft messages later.
func (p *peerNet) forward(in net.Conn, to int, target string) {
	defer in.Close()
	br := bufio.NewReaderSize(in, 64<<10)
	head, from, chunked, length, err := readHead(br)
	if err != nil || !p.track(in, from, to) {
		return
	}
	defer p.untrack(in)
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !p.track(out, from, to) {
		return
	}
	defer p.untrack(out)
	proxy.Splice(in, out, func() {
		for {
			if _, err := out.Write(head); err != nil {
				return
			}
			if err := copyBody(out, br, chunked, length); err != nil {
				return
			}
			var next string
			if head, next, chunked, length, err = readHead(br); err != nil {
				return
			}
			if next != "" && next != from {
				from = next
				p.mu.Lock()
				p.conns[in], p.conns[out] = peerConn{from, to}, peerConn{from, to}
				blocked := p.blocked[[2]int{p.c.memberByID(from), to}]
				p.mu.Unlock()
				if blocked {
					return
				}
			}
		}
	})
}

// copyBody copies a request's body from br to w: length bytes, or chunks
// up to the last one and its trailer.
func copyBody(w io.Writer, br *bufio.Reader, chunked bool, length int64) error {
	if !chunked {
		_, err := io.CopyN(w, br, length)
		return err
	}
	for {
		line, err := copyLine(w, br)
		if err != nil {
			return err
		}
		size, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("etcdtest: bad chunk size %q", line)
		}
		if n == 0 { // the trailer, up to an empty line
			for strings.TrimSpace(line) != "" {
				if line, err = copyLine(w, br); err != nil {
					return err
				}
			}
			return nil
		}
		if _, err := io.CopyN(w, br, n+2); err != nil { // the chunk and its CRLF
			return err
		}
	}
}

// copyLine copies one line from br to w and returns it.
func copyLine(w io.Writer, br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	_, err = io.WriteString(w, line)
	return line, err
}

// readHead reads an HTTP request's head from br and returns it with its
// X-Server-From header ("" without one) and how its body is sent.
func readHead(br *bufio.Reader) (head []byte, from string, chunked bool, length int64, err error) {
	var buf bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		buf.Write(line)
		if err != nil {
			return nil, "", false, 0, err
		}
		if buf.Len() > 64<<10 {
			return nil, "", false, 0, errors.New("etcdtest: a request head over 64 KiB")
		}
		l := strings.TrimRight(string(line), "\r\n")
		if l == "" {
			return buf.Bytes(), from, chunked, length, nil
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)) {
		case "X-Server-From":
			from = value
		case "Content-Length":
			if length, err = strconv.ParseInt(value, 10, 64); err != nil || length < 0 {
				return nil, "", false, 0, fmt.Errorf("etcdtest: bad Content-Length %q", value)
			}
		case "Transfer-Encoding":
			chunked = strings.Contains(strings.ToLower(value), "chunked")
		}
	}
}

func (p *peerNet) close() {
	p.mu.Lock()
	for _, ln := range p.lns {
		ln.Close()
	}
	p.lns = nil
	for conn := range p.conns {
		conn.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
