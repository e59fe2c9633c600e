package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/observe"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// txnGate holds back the first transaction with a condition that a client
// sends (a plain put-and-read has none): it says when the transaction
// reaches the gate, waits for open, and says when etcd answered it.
type txnGate struct {
	armed   chan struct{} // holds one token: the gate catches one transaction
	reached chan struct{}
	open    chan struct{}
	passed  chan struct{}
}

func newTxnGate() *txnGate {
	g := &txnGate{armed: make(chan struct{}, 1), reached: make(chan struct{}), open: make(chan struct{}), passed: make(chan struct{})}
	g.armed <- struct{}{}
	return g
}

func (g *txnGate) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	txn, ok := req.(*etcdserverpb.TxnRequest)
	if !ok || len(txn.Compare) == 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	select {
	case <-g.armed:
	default:
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	close(g.reached)
	defer close(g.passed)
	select {
	case <-g.open:
	case <-ctx.Done(): // the call gave up, or the test failed and closed its Lockers
		return ctx.Err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// await receives from ch, or fails the test after d.
func await[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// TestRWOwnerJoinRace: an owner that holds the read (or write) lock of a
// key takes it again through a second Locker while a writer of another
// owner waits. The second hold is written in two transactions, the second
// of which gives it the place of the owner's first hold. When the first
// hold is released between the two, and the writer, admitted by that
// release, confirms after the second transaction, the owner's second hold
// must not take the place of a hold that is gone: the owner waits behind
// the writer, and the two never hold at once. Gates on the two Lockers'
// clients force that order.
func TestRWOwnerJoinRace(t *testing.T) {
	for _, tc := range []struct {
		name string
		take func(l *etcdlock.Locker, ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error)
	}{
		{"read", (*etcdlock.Locker).RLock},
		{"write", (*etcdlock.Locker).WLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "rw:join:" + driver.NewToken()[:6]
			octx := dlock.ContextWithOwner(ctx, "owner-"+driver.NewToken()[:6])

			joinGate, confirmGate := newTxnGate(), newTxnGate()
			events := make(chan observe.Event, 16)
			watch := observe.Func(func(_ context.Context, e observe.Event) {
				if e.Kind == observe.Wait || e.Kind == observe.Acquire {
					events <- e
				}
			})
			first := newLocker(t, client(t))
			second := newLocker(t, faultyClient(t, joinGate.unary), dlock.WithObserver(watch))
			other := newLocker(t, faultyClient(t, confirmGate.unary))

			h1, err := tc.take(first, octx, key, dlock.WithWait(0))
			if err != nil {
				t.Fatal(err)
			}
			writer := goTake(func() (dlock.Lock, error) { return other.WLock(ctx, key, dlock.WithWait(30*time.Second)) })
			dlocktest.Eventually(t, 10*time.Second, "writer queued", func() bool { return queued(t, first, dlock.KindRWLock, key) == 1 })

			// The owner's second hold: its key is in the queue, and the
			// transaction that gives it the first hold's place waits.
			again := goTake(func() (dlock.Lock, error) { return tc.take(second, octx, key, dlock.WithWait(30*time.Second)) })
			await(t, joinGate.reached, 10*time.Second, "second transaction of the owner's hold")

			// The first hold goes; the writer, admitted, is about to
			// confirm; then the owner's second transaction goes through.
			if err := h1.Unlock(octx); err != nil {
				t.Fatal(err)
			}
			await(t, confirmGate.reached, 10*time.Second, "confirmation of the writer")
			close(joinGate.open)
			await(t, joinGate.passed, 10*time.Second, "answer to the owner's second transaction")
			e := await(t, events, 10*time.Second, "wait or acquisition of the owner's second hold")
			close(confirmGate.open)
			w := await(t, writer, 10*time.Second, "writer")
			if w.err != nil {
				t.Fatalf("the writer: %v", w.err)
			}
			if e.Kind == observe.Acquire && e.Outcome == observe.Acquired {
				r := <-again
				t.Fatalf("the owner's second hold (fence %d) and the writer of another owner (fence %d) both hold %q", r.lk.Fence(), w.lk.Fence(), key)
			}
			if e.Kind != observe.Wait {
				t.Fatalf("the owner's second hold: %v %v (%v), want it to wait behind the writer", e.Kind, e.Outcome, e.Err)
			}
			if info, err := first.InspectKind(ctx, dlock.KindRWLock, key); err != nil || info.Holds != 1 || info.Waiters != 1 || info.Readers != 0 {
				t.Errorf("InspectKind with the writer in: %+v, %v; want the writer holding and the owner waiting", info, err)
			}
			if err := w.lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := await(t, again, 10*time.Second, "owner's second hold after the writer")
			if r.err != nil {
				t.Fatalf("the owner's second hold after the writer left: %v", r.err)
			}
			if r.lk.Fence() <= w.lk.Fence() {
				t.Errorf("the owner's fence %d after the writer's %d", r.lk.Fence(), w.lk.Fence())
			}
			if err := r.lk.Unlock(octx); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
				t.Error(err)
			}
		})
	}
}
