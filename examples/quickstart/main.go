// Command quickstart takes a lock in Redis, works under it, and releases
// it. Run a redis-server (7.0 or later), then: go run ./examples/quickstart
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb, dlock.WithFencing(true)) // one Locker per process
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // releases what is still held

	lk, err := locker.Lock(ctx, "order:42", dlock.WithWait(5*time.Second))
	if errors.Is(err, dlock.ErrNotAcquired) {
		log.Fatal("someone else is working on order 42") // busy is an error value
	}
	if err != nil {
		log.Fatal(err) // Redis could not be reached, a bad key, ...
	}
	fmt.Println("working on order 42 with fence", lk.Fence()) // hand the fence to your storage
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// Or let dlock.Do acquire, run and release, also on panic.
	err = dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
		lk, _ := dlock.LockFrom(ctx) // ctx ends the moment the hold does
		fmt.Println("paying order 42 with fence", lk.Fence())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
