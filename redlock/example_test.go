package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// clients connects to the servers in REDLOCK_ADDRS (the tests set it).
func clients() []redis.UniversalClient {
	var cs []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_ADDRS"), ",") {
		cs = append(cs, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	return cs
}

func Example() {
	ctx := context.Background()
	locker, err := redlock.New(clients())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	lk, err := locker.TryLock(ctx, "example:report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held by a majority of", locker.Quorum(), "nodes or more")

	// Another party finds it busy.
	other, _ := redlock.New(clients())
	defer other.Close()
	_, err = other.TryLock(ctx, "example:report")
	fmt.Println("busy:", errors.Is(err, dlock.ErrNotAcquired))

	// The next holder's fence is greater: hand it to the storage.
	first := lk.Fence()
	lk.Unlock(ctx)
	next, err := other.TryLock(ctx, "example:report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Unlock(ctx)
	fmt.Println("fence rose:", next.Fence() > first)
	// Output:
	// held by a majority of 3 nodes or more
	// busy: true
	// fence rose: true
}

func ExampleRestartDelay() {
	// A node restarted without its data stays out this long when leases
	// are at most 10s.
	fmt.Println(redlock.RestartDelay(dlock.DefaultTTL))
	// Output: 10.102s
}
