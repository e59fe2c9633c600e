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

func ExampleLocker_Acquire() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCD_ENDPOINTS"), "127.0.0.1:2379"), ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	locker, err := etcdlock.New(cli)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// At most two encoders at once, across processes.
	first, _ := locker.Acquire(ctx, "example:encoders", 2)
	second, _ := locker.Acquire(ctx, "example:encoders", 2)
	_, err = locker.TryAcquire(ctx, "example:encoders", 2)
	fmt.Println("third busy:", errors.Is(err, dlock.ErrNotAcquired))
	first.Unlock(ctx)
	third, err := locker.Acquire(ctx, "example:encoders", 2, dlock.WithWait(10*time.Second))
	fmt.Println("third after a release:", err == nil)
	second.Unlock(ctx)
	third.Unlock(ctx)
	// Output:
	// third busy: true
	// third after a release: true
}

func ExampleLocker_WLock() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCD_ENDPOINTS"), "127.0.0.1:2379"), ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	writer, _ := etcdlock.New(cli)
	defer writer.Close()
	reader, _ := etcdlock.New(cli)
	defer reader.Close()
	ctx := context.Background()

	w, err := writer.WLock(ctx, "example:config")
	if err != nil {
		panic(err)
	}
	_, err = reader.TryRLock(ctx, "example:config")
	fmt.Println("read while written:", errors.Is(err, dlock.ErrNotAcquired))
	// Done writing: keep reading what was written, with no writer between.
	if err := dlock.Downgrade(ctx, w); err != nil {
		panic(err)
	}
	r, err := reader.TryRLock(ctx, "example:config")
	fmt.Println("read after the downgrade:", err == nil)
	r.Unlock(ctx)
	w.Unlock(ctx)
	// Output:
	// read while written: true
	// read after the downgrade: true
}
