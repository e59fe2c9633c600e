package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/observe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// A waiter in line whose attempt fails (etcd did not answer the take
// after the release woke it) tries again after the retry delay: the
// release that woke it was its only wake-up, so waiting for the watch
// again would leave it waiting on a free lock until its wait ran out.
func TestLineRetriesAfterFailedTake(t *testing.T) {
	t.Parallel()
	var f faultyKV
	cfg := shared.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(f.unary))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var rec dlocktest.Recorder
	waiter := newLocker(t, cli, dlock.WithObserver(&rec))
	holder := newLocker(t, client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "line:retry:" + driver.NewToken()[:6]

	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const wait = 15 * time.Second
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, key, dlock.WithWait(wait))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	rec.WaitFor(t, key, 10*time.Second, "waiting", func(evs []observe.Event) bool {
		for _, e := range evs {
			if e.Kind == observe.Wait {
				return true
			}
		}
		return false
	})
	f.failTxn.Store(true) // the take that the release wakes fails, unsent
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter, its take failed once, on a free lock: %v", err)
	}
	if f.failTxn.Load() {
		t.Fatal("the waiter's take did not fail: the test forced nothing")
	}
}
