package driver_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// memLocker is a driver whose store is a map in memory: enough to show
// what a driver writes (the store's I/O) and what it takes from package
// driver (everything else).
type memLocker struct {
	opts  dlock.Options
	table driver.Table[*memLock]

	mu    sync.Mutex
	store map[string]string // key -> token
	fence uint64
}

type memLock struct {
	driver.Hold // key, owner, state, Done, Err
	l           *memLocker
	token       string
	fence       uint64
}

func newMemLocker(opts ...dlock.Option) (*memLocker, error) {
	o, err := driver.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	l := &memLocker{opts: o, store: map[string]string{}}
	l.table.Init("mem", o, nil)
	return l, nil
}

func (l *memLocker) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	if err := driver.CheckKey(key); err != nil {
		return nil, &dlock.KeyError{Op: "lock", Key: key, Err: err}
	}
	o, err := l.opts.Apply(opts...)
	if err != nil {
		return nil, &dlock.KeyError{Op: "lock", Key: key, Err: err}
	}
	lk := &memLock{l: l, token: driver.NewToken()}
	lk.Init(driver.HoldLock, key, o.OwnerIn(ctx), o.Owner != "")
	if err := l.table.Reserve(lk, false); err != nil {
		return nil, err // ErrAlreadyHeld, ErrClosed
	}
	l.mu.Lock() // the store's I/O: SET NX
	_, busy := l.store[key]
	if !busy {
		l.fence++
		l.store[key], lk.fence = lk.token, l.fence
	}
	l.mu.Unlock()
	if busy {
		l.table.Remove(lk)
		return nil, &dlock.NotAcquiredError{Key: key}
	}
	if err := l.table.Add(lk); err != nil { // the Locker closed meanwhile
		lk.release()
		return nil, err
	}
	return lk, nil
}

func (l *memLocker) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.TryLock(ctx, key, opts...) // a real driver waits here
}

func (l *memLocker) Unlock(ctx context.Context, key string) error {
	lk, err := l.table.Find(ctx, key)
	if err != nil {
		return err
	}
	return lk.Unlock(ctx)
}

func (l *memLocker) Close() error {
	holds, ok := l.table.Close()
	if !ok {
		return dlock.ErrClosed
	}
	for _, lk := range holds {
		l.table.End(lk, driver.ErrReleasedByClose)
		lk.release()
	}
	return nil
}

// release deletes the key if it is still this hold's: compare and delete.
func (lk *memLock) release() bool {
	lk.l.mu.Lock()
	defer lk.l.mu.Unlock()
	if lk.l.store[lk.Key()] != lk.token {
		return false
	}
	delete(lk.l.store, lk.Key())
	return true
}

func (lk *memLock) Token() string { return lk.token }
func (lk *memLock) Fence() uint64 { return lk.fence }

func (lk *memLock) Unlock(ctx context.Context) error {
	if err := lk.Check("unlock"); err != nil {
		return err // released already, or lost
	}
	if !lk.release() {
		return lk.l.table.Lose(lk, dlock.ErrOwnershipLost)
	}
	lk.l.table.End(lk, dlock.ErrNotHeld)
	return nil
}

func (lk *memLock) Refresh(ctx context.Context, ttl time.Duration) error { return lk.Check("refresh") }
func (lk *memLock) TTL(ctx context.Context) (time.Duration, error)       { return 0, lk.Check("ttl") }

// A driver keeps its store's I/O and takes the rest from package driver:
// options, keys, the table of holds, and each hold's Done and Err.
func Example() {
	l, err := newMemLocker(dlock.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "order:42")
	if err != nil {
		panic(err)
	}
	_, err = l.TryLock(ctx, "order:42")
	fmt.Println(err)
	fmt.Println(l.Unlock(ctx, "order:42"))
	<-lk.Done()
	fmt.Println(lk.Err())
	fmt.Println(lk.Unlock(ctx))
	l.Close()
	_, err = l.TryLock(ctx, "order:42")
	fmt.Println(err)
	// Output:
	// dlock: lock "order:42": already held by this locker
	// <nil>
	// dlock: not held
	// dlock: unlock "order:42": not held
	// dlock: lock "order:42": locker closed
}
