package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// An option of another driver is refused, by the constructor and by a
// call, never silently dropped: redislock.WithReplicaAck asks for what a
// Redlock Locker does not do.
func TestForeignOption(t *testing.T) {
	ack := redislock.WithReplicaAck(1, 100*time.Millisecond)
	if l, err := New(clients(t, shared), ack); !errors.Is(err, dlock.ErrInvalidOption) {
		if l != nil {
			l.Close()
		}
		t.Errorf("New with redislock.WithReplicaAck: %v, want an error matching ErrInvalidOption", err)
	}
	l := newLocker(t, shared)
	ctx := context.Background()
	if lk, err := l.TryLock(ctx, keyFor(t), ack); !errors.Is(err, dlock.ErrInvalidOption) {
		if lk != nil {
			lk.Unlock(ctx)
		}
		t.Errorf("TryLock with redislock.WithReplicaAck: %v, want an error matching ErrInvalidOption", err)
	}
}

// WithNodeTimeout refuses a timeout that is not positive, and applies to
// a Locker only.
func TestWithNodeTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if l, err := New(clients(t, shared), WithNodeTimeout(d)); !errors.Is(err, dlock.ErrInvalidOption) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with WithNodeTimeout(%v): %v, want an error matching ErrInvalidOption", d, err)
		}
	}
	l := newLocker(t, shared)
	ctx := context.Background()
	if lk, err := l.TryLock(ctx, keyFor(t), WithNodeTimeout(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		if lk != nil {
			lk.Unlock(ctx)
		}
		t.Errorf("TryLock with WithNodeTimeout: %v, want an error matching ErrInvalidOption", err)
	}
	if l.timeout != testTimeout {
		t.Errorf("a Locker made with WithNodeTimeout(%v) bounds a node's request by %v", testTimeout, l.timeout)
	}
}
