//go:build !windows

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// startRedisServer starts redis-server on a free loopback port, with its
// files in a temporary directory, through the test harness (which also
// makes the kernel stop it if dlock dies, on Linux).
func startRedisServer() (*demoServer, error) {
	dir, err := os.MkdirTemp("", "dlock-demo-")
	if err != nil {
		return nil, err
	}
	s, err := redistest.New(dir, redistest.Config{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	v := "(version unknown)"
	c := redis.NewClient(s.Options())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if after, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				v = after
			}
		}
	}
	cancel()
	c.Close()
	return &demoServer{
		addr:  s.Addr(),
		about: fmt.Sprintf("started redis-server %s on %s; it stops when the demo ends", v, s.Addr()),
		stop: func() {
			s.Close()
			os.RemoveAll(dir)
		},
	}, nil
}
