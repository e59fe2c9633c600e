package redislock

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// dialGate is a client hook that holds every new connection, once armed,
// until the gate opens or the dial's context ends. Armed after the client's
// first connection, it holds the subscription connection alone.
type dialGate struct {
	armed   atomic.Bool
	blocked atomic.Int32 // dials held now
	open    chan struct{}
}

func newDialGate() *dialGate { return &dialGate{open: make(chan struct{})} }

func (g *dialGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g.armed.Load() {
			g.blocked.Add(1)
			defer g.blocked.Add(-1)
			select {
			case <-g.open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next(ctx, network, addr)
	}
}
func (g *dialGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *dialGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedWaiter returns a Locker whose subscription connection cannot be
// dialled while the gate is armed, and whose wait for a subscription is
// an hour: only the wait's own limits can end it.
func gatedWaiter(t *testing.T) (*Locker, *dialGate) {
	t.Helper()
	c := shared.Client(t)
	gate := newDialGate()
	c.AddHook(gate)
	if err := c.Ping(context.Background()).Err(); err != nil { // the pooled connection
		t.Fatal(err)
	}
	gate.armed.Store(true)
	l, err := New(c, dlock.WithRetry(dlock.FixedInterval(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(gate.open); l.Close() })
	l.notify.SubscribeTimeout = time.Hour
	return l, gate
}

// heldKey returns a key of the test that another Locker holds.
func heldKey(t *testing.T) string {
	t.Helper()
	key := keyFor(t)
	if _, err := newLocker(t, shared).TryLock(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	return key
}

// A waiter whose subscription cannot be set up still stops at its WithWait
// limit, and at Close.
func TestSubscribeSetupHonoursLimits(t *testing.T) {
	t.Run("WithWait", func(t *testing.T) {
		key := heldKey(t)
		waiter, _ := gatedWaiter(t)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(context.Background(), key, dlock.WithWait(300*time.Millisecond))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("Lock = %v, want ErrNotAcquired at its wait limit", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Lock with a 300ms wait still waits for its subscription after 10s")
		}
	})
	t.Run("Close", func(t *testing.T) {
		key := heldKey(t)
		waiter, gate := gatedWaiter(t)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(context.Background(), key)
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for gate.blocked.Load() == 0 { // until the subscription's dial is held
			if time.Now().After(deadline) {
				t.Fatal("the waiter never dialled its subscription")
			}
			time.Sleep(time.Millisecond) // poll interval, bounded by deadline
		}
		closed := make(chan error, 1)
		go func() { closed <- waiter.Close() }()
		select {
		case err := <-done:
			if !errors.Is(err, dlock.ErrClosed) {
				t.Fatalf("Lock = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Lock still waits for its subscription 10s after Close")
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
	})
}
