package redislock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// The Redis driver keeps the contract that every dlock driver keeps.
func TestConformance(t *testing.T) {
	raw := shared.Client(t)
	dlocktest.Run(t, dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := New(shared.Client(t), opts...)
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
		Caps: dlocktest.All,
	})
}
