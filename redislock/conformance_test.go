package redislock

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The Redis driver keeps the contract that every dlock driver keeps, on
// every topology: one server with its defaults (a bare SET NX PX, so no
// fence and no retry-after hint on a busy TryLock) and with every
// acquisition fenced; a Sentinel failover client; a Cluster of three
// masters; a master whose writes a replica acknowledges. The README's
// table of what works where is checked against what ran.
func TestConformance(t *testing.T) {
	t.Parallel() // its topologies have their own servers or keys; they wait on leases
	var m dlocktest.Matrix
	// The topologies run side by side; the table is checked once they all
	// have ended.
	t.Cleanup(func() { m.Check(t, filepath.Join("..", "README.md")) })
	run := func(name, backend string, h func(t *testing.T) dlocktest.Harness) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := h(t)
			h.Backend, h.Matrix = backend, &m
			dlocktest.Run(t, h)
		})
	}
	one := func(t *testing.T) redis.UniversalClient { return shared.Client(t) }
	run("redis", "Redis, one server", func(t *testing.T) dlocktest.Harness {
		return harness(one, dlocktest.Reentrancy|dlocktest.LostSignal)
	})
	run("redis-fenced", "Redis, one server", func(t *testing.T) dlocktest.Harness {
		return harness(one, dlocktest.All, dlock.WithFencing(true))
	})
	run("sentinel", "Redis Sentinel", func(t *testing.T) dlocktest.Harness {
		g := redistest.StartSentinel(t, 1, 3)
		return harness(func(t *testing.T) redis.UniversalClient { return g.Client(t) }, dlocktest.All, dlock.WithFencing(true))
	})
	run("cluster", "Redis Cluster", func(t *testing.T) dlocktest.Harness {
		c := startCluster(t, 3)
		return harness(func(t *testing.T) redis.UniversalClient { return c.client(t) }, dlocktest.All, dlock.WithFencing(true))
	})
	run("replica-ack", "Redis, replica-acknowledged", func(t *testing.T) dlocktest.Harness {
		m := redistest.Start(t)
		redistest.StartReplica(t, m)
		return harness(func(t *testing.T) redis.UniversalClient { return m.Client(t) }, dlocktest.All, dlock.WithFencing(true), WithReplicaAck(1, time.Second))
	})
}

// harness is the conformance harness of Lockers on clients that newClient
// makes (one per Locker), with defaults.
func harness(newClient func(*testing.T) redis.UniversalClient, caps dlocktest.Capabilities, defaults ...dlock.Option) dlocktest.Harness {
	return dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := New(newClient(t), append(defaults, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) {
			if err := newClient(t).Del(context.Background(), "dlock:lock:"+key).Err(); err != nil {
				t.Fatal(err)
			}
		},
		Caps: caps,
	}
}
