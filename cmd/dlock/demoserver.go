package main

import (
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// demoServer is the Redis the demo talks to, started for it alone.
type demoServer struct {
	addr  string
	about string // one line: what was started, where
	stop  func()
}

// startDemoServer starts redis-server on a free loopback port when the
// binary is on PATH, otherwise an in-process stand-in (miniredis). The
// stand-in lacks sharded pub/sub, so waiters there wake on their fallback
// timer (every 100ms) instead of at once.
func startDemoServer() (*demoServer, error) {
	var why string
	if _, err := exec.LookPath("redis-server"); err == nil {
		s, err := startRedisServer()
		if err == nil {
			return s, nil
		}
		why = fmt.Sprintf("redis-server did not start (%v)", err)
	} else {
		why = "redis-server is not on PATH"
	}
	return startStandIn(why)
}

func startStandIn(why string) (*demoServer, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("%s, and the in-process stand-in did not start: %w", why, err)
	}
	// The release script publishes wake-ups with SPUBLISH, which the
	// stand-in lacks: accept them, reaching nobody.
	m.Server().Register("SPUBLISH", func(c *server.Peer, _ string, _ []string) { c.WriteInt(0) })
	// The stand-in's keys expire only when its clock is moved: move it
	// with the real one.
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return &demoServer{
		addr:  m.Addr(),
		about: fmt.Sprintf("%s: using an in-process Redis stand-in (miniredis) on %s; install redis-server for the real thing", why, m.Addr()),
		stop: func() {
			close(quit)
			wg.Wait()
			m.Close()
		},
	}, nil
}
