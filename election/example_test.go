package election_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// A service instance campaigns, works while it leads, and campaigns again
// when its leadership ends; an observer follows the office.
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	locker, err := redislock.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	e, err := election.New(locker, "example:leader", dlock.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}

	octx, stop := context.WithCancel(ctx)
	defer stop()
	updates, err := e.Observe(octx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("observer:", <-updates)

	var last uint64
	for term := range 2 {
		ld, err := e.Campaign(ctx, "10.0.0.7:8080")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("observer:", (<-updates).Value)
		fmt.Println("epoch grew:", ld.Epoch() > last)
		last = ld.Epoch()
		ld.Go(func(ctx context.Context) {
			// Serve as the leader; ctx ends the moment leadership is lost.
			// Hand ld.Epoch() to the storage written to.
			fmt.Println("term", term, "serving")
		})
		if err := ld.Resign(ctx); err != nil { // after the work above returned
			log.Fatal(err)
		}
		fmt.Println("observer:", <-updates)
	}
	// Output:
	// observer: vacant
	// observer: 10.0.0.7:8080
	// epoch grew: true
	// term 0 serving
	// observer: vacant
	// observer: 10.0.0.7:8080
	// epoch grew: true
	// term 1 serving
	// observer: vacant
}

// A report that cron starts on every host at the same minute runs once:
// the first host to take the key runs it, and the key stays taken for 30s,
// so a host whose clock lags by a few seconds finds it taken.
func ExampleRunOnce() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	hostA, _ := redislock.New(client)
	defer hostA.Close()
	hostB, _ := redislock.New(client)
	defer hostB.Close()

	report := func(host string) func(context.Context) error {
		return func(ctx context.Context) error {
			fmt.Println("report sent by", host)
			return nil
		}
	}
	key := fmt.Sprintf("example:report:%d", time.Now().UnixNano())
	err := election.RunOnce(ctx, hostA, key, 30*time.Second, report("host A"))
	fmt.Println("host A:", err)
	err = election.RunOnce(ctx, hostB, key, 30*time.Second, report("host B")) // its clock lags
	fmt.Println("host B skipped the tick:", errors.Is(err, dlock.ErrNotAcquired))
	// Output:
	// report sent by host A
	// host A: <nil>
	// host B skipped the tick: true
}
