package redislock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// The Redis driver keeps the contract that every dlock driver keeps: with
// its defaults (a bare SET NX PX, so no fence and no retry-after hint on a
// busy TryLock), and with every acquisition fenced.
func TestConformance(t *testing.T) {
	raw := shared.Client(t)
	harness := func(caps dlocktest.Capabilities, defaults ...dlock.Option) dlocktest.Harness {
		return dlocktest.Harness{
			New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
				l, err := New(shared.Client(t), append(defaults, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Lose: func(t *testing.T, key string) {
				if err := raw.Del(context.Background(), "dlock:lock:"+key).Err(); err != nil {
					t.Fatal(err)
				}
			},
			Caps: caps,
		}
	}
	t.Run("default", func(t *testing.T) {
		dlocktest.Run(t, harness(dlocktest.Reentrancy|dlocktest.LostSignal))
	})
	t.Run("fenced", func(t *testing.T) {
		dlocktest.Run(t, harness(dlocktest.All, dlock.WithFencing(true)))
	})
}
