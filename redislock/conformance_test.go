package redislock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// The Redis driver keeps the contract that every dlock driver keeps: with
// its defaults (a bare SET NX PX, so no fence and no retry-after hint on a
// busy TryLock), and with every acquisition fenced.
func TestConformance(t *testing.T) {
	newClient := func(t *testing.T) redis.UniversalClient { return shared.Client(t) }
	t.Run("default", func(t *testing.T) {
		dlocktest.Run(t, harness(newClient, dlocktest.Reentrancy|dlocktest.LostSignal|dlocktest.Semaphore|dlocktest.RWLock))
	})
	t.Run("fenced", func(t *testing.T) {
		dlocktest.Run(t, harness(newClient, dlocktest.All|dlocktest.Semaphore|dlocktest.RWLock, dlock.WithFencing(true)))
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
