package redislock

import (
	"testing"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// Package election keeps its rules over the Redis driver.
func TestElection(t *testing.T) {
	t.Parallel() // keys of its own; the suite waits on leases
	newClient := func(t *testing.T) redis.UniversalClient { return shared.Client(t) }
	dlocktest.RunElection(t, harness(newClient, dlocktest.All))
}
