package faults

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A command whose reply the proxy loses took effect: the client gets an
// error (the connection cut), the server has the write. A command the
// proxy repeats takes effect twice, and the client gets one reply: the
// second delivery's.
func TestProxyReplies(t *testing.T) {
	srv := redistest.Start(t)
	p, err := startProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx := context.Background()
	direct := srv.Client(t)
	// No retries: each command is sent once by the client.
	via := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, ReadTimeout: 2 * time.Second})
	defer via.Close()
	if err := via.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	p.setReplies(loseReplies)
	err = via.Set(ctx, "lost", "written", 0).Err()
	if hits := p.setReplies(passReplies); hits != 1 {
		t.Errorf("the reply fault hit %d commands, want 1", hits)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("SET through a proxy that loses its reply: %v, want the connection cut", err)
	}
	if v, err := direct.Get(ctx, "lost").Result(); err != nil || v != "written" {
		t.Fatalf("the SET whose reply was lost: GET = %q, %v; want it written", v, err)
	}

	p.setReplies(repeatCommands)
	n, err := via.Incr(ctx, "twice").Result()
	p.setReplies(passReplies)
	if err != nil || n != 2 {
		t.Fatalf("INCR delivered twice: %d, %v; want the reply of the second, 2", n, err)
	}
	if v, err := direct.Get(ctx, "twice").Int(); err != nil || v != 2 {
		t.Fatalf("INCR delivered twice: the server has %d, %v; want 2", v, err)
	}

	// Through again: the client goes on, on a new connection.
	if v, err := via.Get(ctx, "twice").Int(); err != nil || v != 2 {
		t.Fatalf("after the faults: GET = %d, %v", v, err)
	}
}
