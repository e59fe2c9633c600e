package dlockotel_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// A Locker that records its metrics and spans through the global
// MeterProvider and TracerProvider, which the program's OpenTelemetry
// set-up installed; its locks are named in metrics by the part of the key
// before the first colon.
func ExampleNew() {
	obs, err := dlockotel.New(dlockotel.WithLockName(func(key string) string {
		kind, _, _ := strings.Cut(key, ":") // "order:42" -> "order"
		return kind
	}))
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb, dlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background() // carries the caller's span, if any
	err = dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
		fmt.Println("paying order 42") // inside the span dlock.hold
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// paying order 42
}

// The name a lock has in metrics, by default: identifiers collapse, so
// that the number of series stays small however many keys there are.
func ExampleLockName() {
	for _, key := range []string{"order:42", "user/42/cart", "job:3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31:run", "nightly-report"} {
		fmt.Println(dlockotel.LockName(key))
	}
	// Output:
	// order:*
	// user/*/cart
	// job:*:run
	// nightly-report
}
