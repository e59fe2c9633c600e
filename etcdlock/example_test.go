package etcdlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ExampleLocker_TryLock() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCD_ENDPOINTS"), "127.0.0.1:2379"), ","),
		DialTimeout: 5 * time.Second,
	})
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
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCD_ENDPOINTS"), "127.0.0.1:2379"), ","),
		DialTimeout: 5 * time.Second,
	})
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
