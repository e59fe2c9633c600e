// Command quickstart takes a lock in Redis, works under it, releases it.
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
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	locker, err := redislock.New(rdb, dlock.WithFencing(true)) // one Locker per process
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // releases whatever is still held

	// Do waits up to 5s for the lock, runs the function while holding it,
	// and releases it, also on panic. ctx ends the moment the lock is lost.
	err = dlock.Do(context.Background(), locker, "order:42", func(ctx context.Context) error {
		lk, _ := dlock.LockFrom(ctx)
		fmt.Println("paying order 42 with fence", lk.Fence()) // hand the fence to your storage
		return nil
	}, dlock.WithWait(5*time.Second))
	if errors.Is(err, dlock.ErrNotAcquired) {
		log.Fatal("someone else is paying order 42") // busy is an error value
	}
	if err != nil {
		log.Fatal(err) // Redis out of reach, a bad key, the lock lost while paying, ...
	}
}
