package redislock

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// A TryLock whose reply arrives after Close began gives the lock back and
// returns ErrClosed; it used to panic on a nil handle.
func TestTryLockDuringClose(t *testing.T) {
	ctx := context.Background()
	raw := shared.Client(t)
	c := shared.Client(t)
	hook := &counter{}
	c.AddHook(hook)
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeAfterSet := func(cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			once.Do(func() { l.Close() })
		}
		return nil
	}
	hook.fail.Store(&closeAfterSet)
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key)
	if !errors.Is(err, dlock.ErrClosed) || lk != nil {
		t.Fatalf("TryLock during Close = (handle: %t), %v; want nil, ErrClosed", lk != nil, err)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
		t.Fatal("the lock taken during Close was not given back")
	}
}

// An acquisition that completes while Close runs is either released by
// Close or given back with ErrClosed: never a handle that nothing renews,
// releases or ends.
func TestAcquireRacingClose(t *testing.T) {
	for _, wait := range []bool{false, true} {
		name := "TryLock"
		if wait {
			name = "Lock"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := shared.Client(t)
			l, err := New(shared.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			l.hookAcquired = func() { once.Do(func() { l.Close() }) }
			key := keyFor(t)
			var lk dlock.Lock
			if wait {
				lk, err = l.Lock(ctx, key)
			} else {
				lk, err = l.TryLock(ctx, key)
			}
			if !errors.Is(err, dlock.ErrClosed) || lk != nil {
				t.Fatalf("acquisition racing Close = (handle: %t), %v; want nil, ErrClosed", lk != nil, err)
			}
			if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
				t.Fatal("the lock acquired during Close is still in Redis")
			}
		})
	}
}
