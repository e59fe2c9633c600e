package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
)

// countingDialer dials like rueidis does and counts, on every connection,
// what the client writes: rueidis has no hooks like go-redis's. One write is
// one round trip (a pipelining client writes a whole batch at once, as a
// go-redis pipeline does) and the commands are counted from the RESP arrays
// written.
func countingDialer(rtt *counter) func(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		var (
			c   net.Conn
			err error
		)
		if cfg != nil {
			c, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", addr)
		} else {
			c, err = d.DialContext(ctx, "tcp", addr)
		}
		if err != nil {
			return nil, err
		}
		return &wireConn{Conn: c, rtt: rtt}, nil
	}
}

// wireConn counts the writes and commands of one connection. A client
// writes to a connection from one goroutine at a time.
type wireConn struct {
	net.Conn
	rtt *counter
	r   respCommands
}

func (w *wireConn) Write(b []byte) (int, error) {
	w.rtt.n.Add(1)
	w.rtt.cmds.Add(w.r.feed(b))
	return w.Conn.Write(b)
}

// respCommands counts the commands in a stream of RESP requests, fed in
// pieces of any size. A request is an array of bulk strings:
// "*<n>\r\n" then n times "$<len>\r\n<len bytes>\r\n".
type respCommands struct {
	line []byte // the part of a header line read so far
	skip int    // bytes of a bulk string, and its CRLF, still to pass over
}

// feed reads b and returns how many requests begin in it.
func (r *respCommands) feed(b []byte) (cmds int64) {
	for len(b) > 0 {
		if r.skip > 0 {
			n := min(r.skip, len(b))
			r.skip -= n
			b = b[n:]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			r.line = append(r.line, b...)
			return cmds
		}
		r.line = append(r.line, b[:i]...)
		b = b[i+1:]
		line := bytes.TrimSuffix(r.line, []byte("\r"))
		r.line = r.line[:0]
		if len(line) == 0 {
			continue
		}
		switch line[0] {
		case '*':
			cmds++
		case '$':
			if n, err := strconv.Atoi(string(line[1:])); err == nil && n >= 0 {
				r.skip = n + 2
			}
		}
	}
	return cmds
}
