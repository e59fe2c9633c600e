package main

import "errors"

// startRedisServer is not available on Windows, where the harness that
// starts redis-server does not build: the demo uses its stand-in.
func startRedisServer() (*demoServer, error) {
	return nil, errors.New("not supported on Windows")
}
