package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"

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
			// Close runs between the reply and the record of the hold. It
			// runs in a goroutine of its own, for it waits for Lock calls
			// to return.
			var once sync.Once
			closed := make(chan error, 1)
			l.hookAcquired = func() {
				once.Do(func() {
					go func() { closed <- l.Close() }()
					dlocktest.Eventually(t, 5*time.Second, "Close begins", l.tables.Locks.Closed)
				})
			}
			defer func() { within(t, closed, 5*time.Second, "Close returns") }()
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

// delayHook delays the commands that match by d before sending them.
type delayHook struct {
	d     time.Duration
	match func(redis.Cmder) bool
}

func (h delayHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h delayHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) {
			time.Sleep(h.d) // the injected fault: a slow give-back
		}
		return next(ctx, cmd)
	}
}
func (h delayHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isGiveUp matches the release that a waiter sends to leave the queue.
func isGiveUp(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 3 && args[len(args)-1] == "1" && strings.HasPrefix(cmd.Name(), "eval")
}

// Close returns only after its waiters have left the queue, so that a
// caller may close the client right after.
func TestCloseWaitsForWaiters(t *testing.T) {
	ctx := context.Background()
	raw := shared.Client(t)
	key := keyFor(t)
	holder := newLocker(t, shared)
	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	c := shared.Client(t)
	// The release script is in the server's cache, so that the give-back
	// is one EVALSHA, which the hook delays.
	if err := releaseScript.Load(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.AddHook(delayHook{d: 300 * time.Millisecond, match: isGiveUp})
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, key)
		waiting <- err
	}()
	queue := "{dlock:lock:" + key + "}:q"
	dlocktest.Eventually(t, 5*time.Second, "the waiter queues", func() bool { return raw.ZCard(ctx, queue).Val() == 1 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := raw.ZCard(ctx, queue).Val(); n != 0 {
		t.Fatalf("Close returned with %d waiter(s) still queued", n)
	}
	if err := within(t, waiting, 5*time.Second, "the waiter after Close"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiter after Close = %v", err)
	}
}

// oomHook makes the server refuse writes (maxmemory 1) while it sends the
// commands that match: a real Redis error reply.
type oomHook struct {
	raw   *redis.Client
	match func(redis.Cmder) bool
}

func (h oomHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h oomHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.match(cmd) {
			return next(ctx, cmd)
		}
		h.raw.ConfigSet(ctx, "maxmemory", "1")
		defer h.raw.ConfigSet(ctx, "maxmemory", "0")
		return next(ctx, cmd)
	}
}
func (h oomHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A queued waiter whose next attempt gets an error reply from Redis leaves
// the queue before it returns: a release must not grant the lock to it.
func TestWaiterErrorLeavesQueue(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	raw := s.Client(t)
	key := keyFor(t)
	holder := newLocker(t, s)
	held, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	c.AddHook(oomHook{raw: raw, match: func(cmd redis.Cmder) bool {
		args := cmd.Args() // the acquire script, six keys: ... ARGV[4] mode at 12, ARGV[6] attempt at 14
		return strings.HasPrefix(cmd.Name(), "eval") && len(args) > 14 && fmt.Sprint(args[14]) == "2"
	}})
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(20*time.Millisecond)))
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("Lock = %v, want the OOM error of its second attempt", err)
	}
	queue, waiters := "{dlock:lock:"+key+"}:q", "{dlock:lock:"+key+"}:w"
	if n := raw.ZCard(ctx, queue).Val() + raw.HLen(ctx, waiters).Val(); n != 0 {
		t.Fatalf("the failed waiter is still queued (%d entries)", n)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
		t.Fatal("the release granted the lock to the waiter that had left")
	}
}

// stallHook holds every script call, alone or in a pipeline, until its
// context ends, while stalled is set: a server that never answers.
type stallHook struct{ stalled atomic.Bool }

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.stalled.Load() && strings.HasPrefix(cmd.Name(), "eval") {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}
func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.stalled.Load() {
			<-ctx.Done()
			for _, c := range cmds {
				c.SetErr(ctx.Err())
			}
			return ctx.Err()
		}
		return next(ctx, cmds)
	}
}

// Close gives its releases driver.ReleaseTimeout in all, not each: with a
// server that does not answer, it returns after one timeout however many
// locks it held (it took one timeout per lock: 15.04s for 3).
func TestCloseBoundedWhenServerStalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared.Client(t)
	hook := &stallHook{}
	c.AddHook(hook)
	l, err := New(c, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4 // one timeout each took 4 timeouts
	for i := range n {
		if _, err := l.TryLock(ctx, fmt.Sprintf("%s-%d", keyFor(t), i)); err != nil {
			t.Fatal(err)
		}
	}
	hook.stalled.Store(true)
	began := time.Now()
	err = l.Close()
	took := time.Since(began)
	if err == nil {
		t.Error("Close = nil; want the releases' errors")
	}
	// One timeout, and as much again of slack for a loaded machine: still
	// half of what one timeout per lock takes.
	if limit := 2 * driver.ReleaseTimeout; took > limit {
		t.Errorf("Close took %v with %d locks on a stalled server; want at most %v", took.Round(time.Millisecond), n, limit)
	}
}
