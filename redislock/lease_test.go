package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// scriptHook runs a function around the commands that match: before, in
// place of sending (it gets next and decides), as a fault injector that can
// delay, re-send or fail a command whose effect took place.
type scriptHook struct {
	match func(redis.Cmder) bool
	do    func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) {
			return h.do(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}
func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// twice sends a command two times, as go-redis does after a read timeout
// when the first reply was lost: the caller sees the second reply.
func twice(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	next(ctx, cmd)
	return next(ctx, cmd)
}

// replyLost sends a command and loses its reply: the command took effect,
// and the caller sees a timeout.
func replyLost(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	next(ctx, cmd)
	err := errors.New("i/o timeout (injected after the command ran)")
	cmd.SetErr(err)
	return err
}

// lockerWith returns a Locker on a client of the shared server with hook.
func lockerWith(t *testing.T, hook redis.Hook, opts ...dlock.Option) *Locker {
	t.Helper()
	c := shared.Client(t)
	c.AddHook(hook)
	l, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A command re-sent after its reply was lost finds its own effect: the
// acquisition has the lock, and the release has released it.
func TestResentCommands(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []dlock.Option
	}{
		{"plain", nil},
		{"fenced", []dlock.Option{dlock.WithFencing(true)}},
		{"owner", []dlock.Option{dlock.WithOwner("resent-owner")}},
		{"fair", []dlock.Option{dlock.WithFair(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lockerWith(t, scriptHook{
				match: func(cmd redis.Cmder) bool {
					return cmd.Name() == "set" || tryScript.Runs(cmd) || acquireScript.Runs(cmd) || releaseScript.Runs(cmd)
				},
				do: twice,
			}, tc.opts...)
			key := keyFor(t)
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("TryLock whose command was sent twice = %v, want the lock", err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("Unlock whose release was sent twice = %v, want nil", err)
			}
			if n := shared.Client(t).Exists(ctx, "dlock:lock:"+key).Val(); n != 0 {
				t.Fatal("the lock is still in Redis")
			}
		})
	}
}

// After a release whose reply was lost (it did delete), the watchdog must
// not renew the lock, nor declare it lost: the caller's retried Unlock
// returns nil.
func TestReleaseLostReplyBeatsWatchdog(t *testing.T) {
	ctx := context.Background()
	var dropRelease atomic.Bool
	l := lockerWith(t, scriptHook{
		match: func(cmd redis.Cmder) bool { return dropRelease.Load() && releaseScript.Runs(cmd) },
		do:    replyLost,
	})
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	dropRelease.Store(true)
	if err := lk.Unlock(ctx); err == nil {
		t.Fatal("Unlock whose reply was lost = nil, want the error")
	}
	dropRelease.Store(false)
	// The watchdog's next renewal falls due at ttl/3, long before the
	// lease deadline: wait for the handle to end, whichever way.
	within(t, lk.Done(), 5*time.Second, "Done of the released hold")
	if errors.Is(lk.Err(), dlock.ErrLockLost) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
		t.Fatalf("Err = %v: the watchdog declared a released lock lost", lk.Err())
	}
	if err := lk.Unlock(ctx); errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("retried Unlock = %v, want no loss", err)
	}
}

// A release that fails leaves a lease that is no longer renewed: the key
// lapses at its TTL at the latest, and the handle ends.
func TestFailedReleaseStopsRenewal(t *testing.T) {
	ctx := context.Background()
	var failRelease atomic.Bool
	l := lockerWith(t, scriptHook{
		match: func(cmd redis.Cmder) bool { return failRelease.Load() && releaseScript.Runs(cmd) },
		do: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			err := errors.New("connection refused (injected: the release never left)")
			cmd.SetErr(err)
			return err
		},
	})
	key := keyFor(t)
	// A 1s lease: under load, a 300ms one was once lost before its Unlock
	// ("lease deadline passed"), which is not what this test is about.
	ttl := time.Second
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	failRelease.Store(true)
	if err := lk.Unlock(ctx); err == nil {
		t.Fatal("Unlock = nil, want the injected failure")
	}
	raw := shared.Client(t)
	dlocktest.Eventually(t, 10*ttl, "the unreleased key lapses", func() bool { return raw.Exists(ctx, "dlock:lock:"+key).Val() == 0 })
	within(t, lk.Done(), 10*ttl, "Done of a hold whose release failed")
	if errors.Is(lk.Err(), dlock.ErrLockLost) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
		t.Fatalf("Err = %v, want a release (ErrNotHeld), not a loss", lk.Err())
	}
}

// A Refresh to a shorter lease whose reply was lost leaves the handle on
// the shorter lease: Redis may have applied it.
func TestRefreshShorterLostReply(t *testing.T) {
	ctx := context.Background()
	var drop atomic.Bool
	l := lockerWith(t, scriptHook{
		match: func(cmd redis.Cmder) bool { return drop.Load() && refreshScript.Runs(cmd) },
		do:    replyLost,
	})
	lk, err := l.TryLock(ctx, keyFor(t), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	drop.Store(true)
	short := 200 * time.Millisecond
	sent := time.Now()
	if err := lk.Refresh(ctx, short); err == nil {
		t.Fatal("Refresh whose reply was lost = nil")
	}
	if d := lk.(*hold).leaseDeadline(); d.After(sent.Add(short)) {
		t.Fatalf("local deadline %v after the refresh was sent, want at most %v", d.Sub(sent), short)
	}
}

// A renewal on the wire when Refresh shortens the lease must not put the
// longer deadline back when its reply comes.
func TestRenewalRacingRefresh(t *testing.T) {
	ctx := context.Background()
	held := make(chan struct{}) // the renewal ran and its reply waits
	gate := make(chan struct{})
	var once sync.Once
	l := lockerWith(t, scriptHook{
		match: func(cmd redis.Cmder) bool { return renews(cmd) },
		do: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			err := next(ctx, cmd)
			once.Do(func() {
				close(held)
				<-gate
			})
			return err
		},
	})
	ttl := 600 * time.Millisecond
	lk, err := l.TryLock(ctx, keyFor(t), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	within(t, held, 5*time.Second, "the first renewal")
	short := 100 * time.Millisecond
	sent := time.Now()
	if err := lk.Refresh(ctx, short); err != nil {
		t.Fatal(err)
	}
	close(gate)
	dlocktest.Eventually(t, 5*time.Second, "the renewal's reply is filed", func() bool {
		return !l.watchdog.Renewing(lk.(*hold))
	})
	// A renewal at the new TTL may follow at once (and lengthen the lease
	// by what it is), but no deadline may be further than short from now.
	if d, now := lk.(*hold).leaseDeadline(), time.Now(); d.After(now.Add(short)) {
		t.Fatalf("local deadline %v after Refresh(%v), %v from now: the older renewal put a longer lease back", d.Sub(sent), short, d.Sub(now))
	}
}

// gateHook holds the commands that match until open is closed.
type gateHook struct {
	open  <-chan struct{}
	match func(redis.Cmder) bool
}

func (h gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) {
			<-h.open
		}
		return next(ctx, cmd)
	}
}
func (h gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A lease that lapses while its Unlock is on the way (the release reaches
// Redis after the deadline, and finds the key gone) is released, not an
// error: Unlock began before the deadline, so the holder stopped counting
// on the lock then (it returned a bare ErrNotHeld, as for a second Unlock).
func TestUnlockOutlivedByLease(t *testing.T) {
	ctx := context.Background()
	raw := shared.Client(t)
	key := keyFor(t)
	done := make(chan (<-chan struct{}), 1)
	open := make(chan struct{})
	go func() {
		<-<-done // the handle ended at its deadline
		deadline := time.Now().Add(5 * time.Second)
		for raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // poll interval, bounded by deadline
		}
		close(open) // and Redis let the key expire
	}()
	l := lockerWith(t, gateHook{open: open, match: func(cmd redis.Cmder) bool { return releaseScript.Runs(cmd) }},
		dlock.WithLease(100*time.Millisecond))
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	done <- lk.Done() // the release goes once the lease has lapsed
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock outlived by its lease = %v, want nil", err)
	}
	if !errors.Is(lk.Err(), dlock.ErrNotHeld) || errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Errorf("Err = %v, want released (ErrNotHeld, not a loss)", lk.Err())
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("a second Unlock = %v, want ErrNotHeld", err)
	}
}

// A waiting Lock whose bare SET was sent twice finds its own token: at
// once (WithWait(0)), at its next attempt (a poll), or when it joins the
// queue.
func TestResentSetOfLock(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []dlock.Option
	}{
		{"notify", nil},
		{"single", []dlock.Option{dlock.WithWait(0)}},
		{"poll", []dlock.Option{dlock.WithNotify(false), dlock.WithRetry(dlock.FixedInterval(10 * time.Millisecond))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lockerWith(t, scriptHook{match: func(cmd redis.Cmder) bool { return cmd.Name() == "set" }, do: twice})
			key := keyFor(t)
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second) // well within the lease: no wait for it to lapse
			defer cancel()
			lk, err := l.Lock(lctx, key, append([]dlock.Option{dlock.WithTTL(time.Minute)}, tc.opts...)...)
			if err != nil {
				t.Fatalf("Lock whose SET was sent twice = %v, want the lock", err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
