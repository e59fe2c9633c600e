package main

import (
	"context"
	"net"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRespCommands feeds a stream of requests cut at every byte, and in
// two pieces at every point: the count must not depend on the cuts, and a
// bulk string that looks like a request must not count.
func TestRespCommands(t *testing.T) {
	stream := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$8\r\n*1\r\n$1\r\nx\r\n" + // a value that looks like a request
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" +
		"*4\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n1\r\n$0\r\n\r\n")
	const want = 3
	var r respCommands
	var n int64
	for i := range stream {
		n += r.feed(stream[i : i+1])
	}
	if n != want {
		t.Errorf("byte by byte: %d requests, want %d", n, want)
	}
	for cut := range len(stream) + 1 {
		var r respCommands
		if n := r.feed(stream[:cut]) + r.feed(stream[cut:]); n != want {
			t.Errorf("cut at %d: %d requests, want %d", cut, n, want)
		}
	}
}

// TestWireCounter counts one go-redis client both ways, with the hook the
// go-redis systems use and on the wire as for rueidis: the counts agree.
func TestWireCounter(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var hook, wire counter
	dial := countingDialer(&wire)
	opts := clientOptions(srv.Addr())
	opts.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
		return dial(ctx, addr, &net.Dialer{}, nil)
	}
	opts.PoolSize = 1
	c := newClient(opts, &hook)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil { // connects: the handshake is no round trip of ours
		t.Fatal(err)
	}
	hook.reset()
	wire.reset()
	release := redis.NewScript(releaseSrc)
	if err := c.SetNX(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := release.Run(ctx, c, []string{"k"}, "v").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "a")
		p.Get(ctx, "b")
		p.Get(ctx, "c")
		return nil
	}); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	// SET, the script (EVALSHA, then EVAL as the server lacks it) and a
	// pipeline of three.
	if hook.n.Load() < 3 || hook.cmds.Load() < 5 {
		t.Fatalf("hook: %d round trips, %d commands: want at least 3 and 5", hook.n.Load(), hook.cmds.Load())
	}
	if wire.n.Load() != hook.n.Load() || wire.cmds.Load() != hook.cmds.Load() {
		t.Errorf("wire: %d round trips, %d commands; hook: %d, %d", wire.n.Load(), wire.cmds.Load(), hook.n.Load(), hook.cmds.Load())
	}
}
