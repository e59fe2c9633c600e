package redislock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// At most two encoders at once, across processes: each takes a permit of
// the key's semaphore, and a third is refused until one gives it back.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	first, _ := locker.TryAcquire(ctx, "encoders", 2)
	second, _ := locker.TryAcquire(ctx, "encoders", 2)
	_, err = locker.TryAcquire(ctx, "encoders", 2)
	fmt.Println("third busy:", errors.Is(err, dlock.ErrNotAcquired))

	first.Unlock(ctx)
	third, err := locker.TryAcquire(ctx, "encoders", 2)
	fmt.Println("third after a release:", err == nil)
	second.Unlock(ctx)
	third.Unlock(ctx)

	// dlock.Permits makes the semaphore a Locker, for dlock.Do.
	err = dlock.Do(ctx, dlock.Permits(locker, 2), "encoders", func(ctx context.Context) error {
		fmt.Println("encoding under a permit")
		return nil
	})
	fmt.Println(err)
	// Output:
	// third busy: true
	// third after a release: true
	// encoding under a permit
	// <nil>
}

// Readers share the key's read lock; a writer waits for them, and may
// become a reader without letting another writer in.
func ExampleLocker_RLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	a, _ := redislock.New(rdb)
	defer a.Close()
	b, _ := redislock.New(rdb)
	defer b.Close()
	c, _ := redislock.New(rdb)
	defer c.Close()

	r1, _ := a.RLock(ctx, "config")
	r2, _ := b.RLock(ctx, "config")
	fmt.Println("two readers:", r1.Err() == nil && r2.Err() == nil)
	_, err := c.TryWLock(ctx, "config")
	fmt.Println("writer busy:", errors.Is(err, dlock.ErrNotAcquired))
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	w, _ := a.WLock(ctx, "config")
	if err := dlock.Downgrade(ctx, w); err != nil { // now a reader, with the same hold
		panic(err)
	}
	r, err := b.TryRLock(ctx, "config")
	fmt.Println("reader beside the downgraded writer:", err == nil)
	r.Unlock(ctx)
	w.Unlock(ctx)
	// Output:
	// two readers: true
	// writer busy: true
	// reader beside the downgraded writer: true
}

// A transfer locks both accounts. Keys that share a hash tag sit in one
// Cluster slot, so the Locker takes them together in one round trip, on a
// Cluster as on a single server; a busy account leaves both free.
func ExampleLocker_TryLockMulti() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	accounts := []string{"{bank:7}:alice", "{bank:7}:bob"}
	err = dlock.DoAll(ctx, locker, accounts, func(ctx context.Context) error {
		fmt.Println("moving 10 from alice to bob")
		return nil
	})
	fmt.Println(err)

	bob, _ := locker.TryLock(ctx, "{bank:7}:bob")
	_, err = dlock.TryLockAll(ctx, locker, accounts)
	var busy *dlock.NotAcquiredError
	fmt.Println("busy:", errors.As(err, &busy), busy.Key)
	alice, err := locker.TryLock(ctx, "{bank:7}:alice")
	fmt.Println("alice free:", err == nil)
	alice.Unlock(ctx)
	bob.Unlock(ctx)
	// Output:
	// moving 10 from alice to bob
	// <nil>
	// busy: true {bank:7}:bob
	// alice free: true
}
