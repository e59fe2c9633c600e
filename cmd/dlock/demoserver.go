package main

import (
	"fmt"
	"os/exec"
)

// demoServer is the Redis the demo talks to, started for it alone.
type demoServer struct {
	addr  string
	about string // one line: what was started, where
	stop  func()
}

// startDemoServer starts redis-server on a free loopback port when the
// binary is on PATH, otherwise an in-process stand-in.
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
