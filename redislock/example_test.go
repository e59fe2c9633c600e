package redislock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

func ExampleLocker_TryLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lk, err := locker.TryLock(ctx, "report:daily", dlock.WithTTL(30*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lk.Key())

	// A second party is refused at once; busy is an error value.
	other, _ := redislock.New(rdb)
	defer other.Close()
	_, err = other.TryLock(ctx, "report:daily")
	fmt.Println("busy:", errors.Is(err, dlock.ErrNotAcquired))

	if err := lk.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("released")
	// Output:
	// holding report:daily
	// busy: true
	// released
}

func ExampleLocker_Lock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	a, _ := redislock.New(rdb)
	defer a.Close()
	b, _ := redislock.New(rdb)
	defer b.Close()

	first, err := a.TryLock(ctx, "invoice:7")
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Wait up to five seconds; the release wakes this waiter at once.
		lk, err := b.Lock(ctx, "invoice:7", dlock.WithWait(5*time.Second))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("second holder")
		lk.Unlock(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter start waiting, for the story
	fmt.Println("first holder releases")
	first.Unlock(ctx)
	wg.Wait()
	// Output:
	// first holder releases
	// second holder
}

func ExampleLocker_Unlock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, _ := redislock.New(rdb)
	defer locker.Close()

	if _, err := locker.TryLock(ctx, "migration"); err != nil {
		panic(err)
	}
	// A Locker without an owner refuses to hold a key twice...
	_, err := locker.TryLock(ctx, "migration")
	fmt.Println(errors.Is(err, dlock.ErrAlreadyHeld))
	// ...and releases its own hold by key, through the Locker.
	fmt.Println(locker.Unlock(ctx, "migration"))
	fmt.Println(errors.Is(locker.Unlock(ctx, "migration"), dlock.ErrNotHeld))
	// Output:
	// true
	// <nil>
	// true
}

func ExampleDo() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, _ := redislock.New(rdb)
	defer locker.Close()

	err := dlock.Do(ctx, locker, "order:42", func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost while this runs.
		fmt.Println("paying order 42")
		return nil
	}, dlock.WithWait(time.Second))
	fmt.Println("done:", err)
	// Output:
	// paying order 42
	// done: <nil>
}

// store is a resource that keeps the highest fence it has seen, and refuses
// writes that carry a lower one: a holder that paused past its lease cannot
// overwrite the work of the holder after it.
type store struct {
	mu    sync.Mutex
	fence uint64
	value string
}

var errStale = errors.New("stale fencing token")

func (s *store) write(fence uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.fence {
		return errStale
	}
	s.fence, s.value = fence, value
	return nil
}

func Example_fencing() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	// Fences are asked for: they cost a counter per key in Redis.
	a, _ := redislock.New(rdb, dlock.WithFencing(true))
	defer a.Close()
	b, _ := redislock.New(rdb, dlock.WithFencing(true))
	defer b.Close()
	var s store

	// A takes the lock, then pauses past its 50ms lease without renewing.
	slow, _ := a.TryLock(ctx, "ledger", dlock.WithLease(50*time.Millisecond))
	<-slow.Done()
	// B takes it after the lease and writes.
	lk, err := b.Lock(ctx, "ledger", dlock.WithWait(5*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("B writes:", s.write(lk.Fence(), "B"))
	// A wakes up and tries to write with its old fence: refused.
	fmt.Println("A writes:", s.write(slow.Fence(), "A"))
	fmt.Println("value:", s.value)
	lk.Unlock(ctx)
	// Output:
	// B writes: <nil>
	// A writes: stale fencing token
	// value: B
}

func ExampleWithReplicaAck() {
	ctx := context.Background()
	// A Sentinel-managed master with its replicas; here, a server of its own.
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	// A lock counts only once a replica has it, so that a failover to that
	// replica cannot grant it to someone else while this process holds it.
	locker, err := redislock.New(rdb, redislock.WithReplicaAck(1, 100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	_, err = locker.TryLock(ctx, "ledger:close")
	switch {
	case errors.Is(err, redislock.ErrNotReplicated):
		fmt.Println("no replica acknowledged the lock: it was given back")
	case err != nil:
		panic(err)
	default:
		fmt.Println("held, and on a replica")
	}
	// Output:
	// no replica acknowledged the lock: it was given back
}
