package dlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// Do acquires, runs and releases, also on panic; fn's context carries the
// lock and ends the moment the hold does.
func ExampleDo() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb, dlock.WithFencing(true))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	err = dlock.Do(ctx, locker, "invoice:42", func(ctx context.Context) error {
		lk, _ := dlock.LockFrom(ctx)
		fmt.Println("invoicing", lk.Key(), "with a fence:", lk.Fence() > 0)
		return nil // or ctx.Err() once the hold ends early
	}, dlock.WithWait(5*time.Second))
	fmt.Println("done:", err)
	// Output:
	// invoicing invoice:42 with a fence: true
	// done: <nil>
}

// An owner id makes a lock reentrant for everything that acts for that
// owner: here, a request that takes the same lock twice on its way down.
func ExampleWithOwner() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx = dlock.ContextWithOwner(ctx, "request-7f3a")
	outer, err := locker.TryLock(ctx, "cart:9")
	if err != nil {
		panic(err)
	}
	inner, err := locker.TryLock(ctx, "cart:9") // the same owner: a second hold
	fmt.Println("inner hold:", err)
	inner.Unlock(ctx)

	_, err = locker.TryLock(dlock.ContextWithOwner(context.Background(), "request-other"), "cart:9")
	fmt.Println("another owner is busy:", errors.Is(err, dlock.ErrNotAcquired))
	outer.Unlock(ctx)
	// Output:
	// inner hold: <nil>
	// another owner is busy: true
}

// ledger is storage that keeps the highest fence it has accepted and
// refuses a write that carries a lower one.
type ledger struct{ highest uint64 }

func (l *ledger) write(fence uint64) error {
	if fence < l.highest {
		return fmt.Errorf("fence %d is stale", fence)
	}
	l.highest = fence
	return nil
}

// A fencing token lets the storage refuse a holder that lost its lock
// while it paused.
func ExampleWithFencing() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	locker, err := redislock.New(rdb, dlock.WithFencing(true))
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	var store ledger

	slow, err := locker.TryLock(ctx, "ledger", dlock.WithLease(50*time.Millisecond))
	if err != nil {
		panic(err)
	}
	<-slow.Done() // it paused past its lease, and lost the lock
	fast, err := locker.Lock(ctx, "ledger", dlock.WithWait(time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("new holder writes:", store.write(fast.Fence()))
	fmt.Println("late writer:", store.write(slow.Fence()) != nil)
	fast.Unlock(ctx)
	// Output:
	// new holder writes: <nil>
	// late writer: true
}

// Errors are values: match them with errors.Is, and read their details
// with errors.As.
func Example_errors() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	a, _ := redislock.New(rdb)
	defer a.Close()
	b, _ := redislock.New(rdb)
	defer b.Close()

	held, err := a.TryLock(ctx, "job:nightly", dlock.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	_, err = b.TryLock(ctx, "job:nightly", dlock.WithFencing(true))
	var busy *dlock.NotAcquiredError
	if errors.As(err, &busy) {
		fmt.Println("busy; retry within a minute:", busy.RetryAfter <= time.Minute)
	}
	held.Unlock(ctx)

	err = held.Unlock(ctx)
	fmt.Println("unlocking twice:", errors.Is(err, dlock.ErrNotHeld))
	var ke *dlock.KeyError
	if errors.As(err, &ke) {
		fmt.Println("the key:", ke.Key)
	}
	// Output:
	// busy; retry within a minute: true
	// unlocking twice: true
	// the key: job:nightly
}

// An Observer sees what the Locker's locks do: here, it prints each event
// (a logger, a metrics library or package dlockotel would record it).
func ExampleWithObserver() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	show := observe.Func(func(_ context.Context, e observe.Event) {
		switch e.Kind {
		case observe.Acquire:
			fmt.Println(e.Kind, e.Key, e.Outcome, "after", e.Attempts, "attempt")
		case observe.Release, observe.Lost:
			fmt.Println(e.Kind, e.Key, "held for more than 0s:", e.Held > 0)
		}
	})
	locker, err := redislock.New(rdb, dlock.WithObserver(show))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lk, err := locker.TryLock(ctx, "report:weekly")
	if err != nil {
		panic(err)
	}
	other, _ := redislock.New(rdb, dlock.WithObserver(show))
	defer other.Close()
	other.TryLock(ctx, "report:weekly") // busy
	lk.Unlock(ctx)
	// Output:
	// acquire report:weekly acquired after 1 attempt
	// acquire report:weekly busy after 1 attempt
	// release report:weekly held for more than 0s: true
}
