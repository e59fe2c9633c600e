package gocronlock_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/gocronlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Two hosts run the same scheduler: each run of the job happens on one of
// them, and the other skips it.
func ExampleNewLocker() {
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	job := fmt.Sprintf("example:report:%d", time.Now().UnixNano()) // a name per run of this example

	ran, skipped := make(chan string, 2), make(chan string, 2)
	for _, host := range []string{"host A", "host B"} {
		locker, err := redislock.New(rdb) // one Locker per process
		if err != nil {
			panic(err)
		}
		defer locker.Close()
		// Each run's lock is held at least 30s from its start, so that a
		// host whose clock lags by less than that finds the run taken.
		jobLocker, err := gocronlock.NewLocker(locker, 30*time.Second)
		if err != nil {
			panic(err)
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(jobLocker))
		if err != nil {
			panic(err)
		}
		defer s.Shutdown()
		_, err = s.NewJob(
			gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
			gocron.NewTask(func() { ran <- host }),
			gocron.WithName(job), // the lock's key
			gocron.WithEventListeners(gocron.AfterLockError(func(uuid.UUID, string, error) { skipped <- host })),
		)
		if err != nil {
			panic(err)
		}
		s.Start()
	}
	winner, loser := <-ran, <-skipped
	fmt.Println("ran once:", winner != loser)
	// Output:
	// ran once: true
}

// A scheduler runs its jobs only while its process leads the election.
func ExampleNewElector() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	e, err := election.New(locker, "example:scheduler-leader")
	if err != nil {
		panic(err)
	}
	elector := gocronlock.NewElector(e, "host A")
	defer elector.Close() // resigns; runs after the scheduler's Shutdown

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		panic(err)
	}
	defer s.Shutdown()
	done := make(chan struct{})
	_, err = s.NewJob(
		gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {
			defer close(done)
			if ld := elector.Leadership(); ld != nil {
				// Hand ld.Epoch() to the storage the job writes to, so
				// that it refuses the writes of a former leader.
				fmt.Println("report written by", ld.Value())
			}
		}),
	)
	if err != nil {
		panic(err)
	}

	// Wait until this process leads, then start the scheduler.
	watch, stopWatching := context.WithCancel(ctx)
	updates, err := e.Observe(watch)
	if err != nil {
		panic(err)
	}
	for leader := range updates {
		if leader.Value == "host A" {
			break
		}
	}
	stopWatching()
	s.Start()
	<-done
	// Output:
	// report written by host A
}
