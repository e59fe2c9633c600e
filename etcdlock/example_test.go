package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ExampleLocker_TryLock() {
	// The tests run an embedded etcd; use your cluster's endpoints.
	cli, err := clientv3.New(etcdtest.ClientConfig(shared.Endpoints()...))
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	a, _ := etcdlock.New(cli)
	defer a.Close()
	b, _ := etcdlock.New(cli)
	defer b.Close()
	ctx := context.Background()

	lk, err := a.TryLock(ctx, "example:order:42", dlock.WithTTL(30*time.Second))
	if err != nil {
		panic(err)
	}
	_, err = b.TryLock(ctx, "example:order:42")
	fmt.Println("busy:", errors.Is(err, dlock.ErrNotAcquired))
	if err := lk.Unlock(ctx); err != nil {
		panic(err)
	}
	lk, err = b.TryLock(ctx, "example:order:42")
	fmt.Println("after release:", err == nil)
	lk.Unlock(ctx)
	// Output:
	// busy: true
	// after release: true
}

func ExampleNew_shortTTL() {
	cli, err := clientv3.New(etcdtest.ClientConfig(shared.Endpoints()...))
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	_, err = etcdlock.New(cli, dlock.WithTTL(500*time.Millisecond))
	fmt.Println(errors.Is(err, dlock.ErrInvalidTTL))
	fmt.Println(err)
	// Output:
	// true
	// dlock: invalid ttl: 500ms is below 1s; etcd leases are whole seconds
}
