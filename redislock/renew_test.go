package redislock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// calls reads how many calls of the named commands the server has run,
// scripts' inner calls included.
func calls(t testing.TB, c *redis.Client, names ...string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, name := range names {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
				v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				n += v
			}
		}
	}
	return n
}

// evalCalls reads how many EVALSHA and EVAL calls the server has run.
func evalCalls(t testing.TB, c *redis.Client) int64 { return calls(t, c, "evalsha", "eval") }

func TestWatchdogKeepsAndStops(t *testing.T) {
	noLeak(t)
	ctx := context.Background()
	s := redistest.Start(t)
	a, b := newLocker(t, s), newLocker(t, s)
	raw := s.Client(t)
	key := keyFor(t)
	// A 600ms lease, renewed every 200ms: under the load of a whole test
	// run a 300ms one (renewed with 200ms to spare) was lost once.
	const ttl = 600 * time.Millisecond
	lk, err := a.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// Held for five leases: the other Locker keeps failing.
	until := time.Now().Add(5 * ttl)
	for time.Now().Before(until) {
		if _, err := b.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock while the watchdog holds: %v (holder's Err %v)", err, lk.Err())
		}
		time.Sleep(50 * time.Millisecond) // probing the lock as time passes
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// After Unlock, no renewal reaches the server for two more periods.
	before := evalCalls(t, raw)
	time.Sleep(2 * ttl / 3) // observation window: nothing may happen in it
	if after := evalCalls(t, raw); after != before {
		t.Fatalf("%d script calls after Unlock", after-before)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
		t.Fatal("key still there")
	}
}

func TestOwnershipLostSignal(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	raw := shared.Client(t)
	key := keyFor(t)
	const ttl = 300 * time.Millisecond
	lk, err := a.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "dlock:lock:"+key)
	theirs, err := b.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), ttl/3+time.Second, "Done after the key was taken")
	if err := lk.Err(); !errors.Is(err, dlock.ErrOwnershipLost) || !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrOwnershipLost", err)
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrOwnershipLost) {
		t.Fatalf("Unlock after loss = %v, want the loss reason", err)
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != theirs.Token() {
		t.Fatalf("the new holder's key = %q", got)
	}
	if err := a.Unlock(ctx, key); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Locker.Unlock after loss = %v", err)
	}
	if _, err := a.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("re-acquire after loss = %v, want ErrNotAcquired (not ErrAlreadyHeld)", err)
	}
}

func TestServerUnreachable(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := newLocker(t, s)
	key := keyFor(t)
	const ttl = time.Second
	t0 := time.Now()
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// The local deadline counts from before the acquire was sent, less the
	// drift margin: it falls before the server could expire the key.
	deadline := lk.(*hold).leaseDeadline()
	if !deadline.After(t0.Add(ttl-redisnode.Drift.Of(ttl))) || !deadline.Before(time.Now().Add(ttl-redisnode.Drift.Of(ttl))) {
		t.Fatalf("lease deadline %v after acquire, want within the call's span + ttl - drift", deadline.Sub(t0))
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer s.Resume()
	within(t, lk.Done(), ttl+2*time.Second, "Done while the server is stopped")
	lostAt := time.Now()
	if lostAt.Before(deadline) {
		// renewals kept failing for want of a reply; giving up early is wrong
		t.Fatalf("declared lost %v before the deadline", deadline.Sub(lostAt))
	}
	if err := lk.Err(); !errors.Is(err, dlock.ErrLeaseExpired) || !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", err)
	}
	t.Logf("declared lost %v after the local deadline (server expiry no earlier than %v after it)", lostAt.Sub(deadline), redisnode.Drift.Of(ttl))
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	// the key expires on the server by itself; the next acquire works
	dlocktest.Eventually(t, 5*time.Second, "acquire after SIGCONT", func() bool {
		lk, err := l.TryLock(ctx, key, dlock.WithTTL(ttl))
		if err == nil {
			lk.Unlock(ctx)
		}
		return err == nil
	})
}

func (lk *hold) leaseDeadline() time.Time {
	return lk.l.watchdog.Deadline(lk)
}

func TestLeaseWithoutWatchdog(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	lk, err := l.TryLock(ctx, keyFor(t), dlock.WithLease(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), 2*time.Second, "Done of a pinned lease")
	if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
		t.Fatalf("Err = %v", lk.Err())
	}
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	raw := shared.Client(t)
	key := keyFor(t)
	redisKey := "dlock:lock:" + key

	// released after an error, which is returned
	boom := errors.New("boom")
	err := dlock.Do(ctx, l, key, func(ctx context.Context) error {
		if raw.Exists(ctx, redisKey).Val() != 1 {
			t.Error("fn runs without the lock")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if raw.Exists(ctx, redisKey).Val() != 0 {
		t.Fatal("not released after fn's error")
	}

	// released on panic, which continues
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Fatalf("recovered %v", r)
			}
		}()
		dlock.Do(ctx, l, key, func(context.Context) error { panic("panic in fn") })
	}()
	if raw.Exists(ctx, redisKey).Val() != 0 {
		t.Fatal("not released after a panic")
	}

	// fn's context is cancelled when the lock is lost, with the loss as cause
	err = dlock.Do(ctx, l, key, func(fctx context.Context) error {
		raw.Del(ctx, redisKey)
		raw.Set(ctx, redisKey, "thief", time.Minute)
		select {
		case <-fctx.Done():
		case <-time.After(5 * time.Second):
			return errors.New("fn's context not cancelled")
		}
		if !errors.Is(context.Cause(fctx), dlock.ErrOwnershipLost) {
			return fmt.Errorf("cause %v", context.Cause(fctx))
		}
		return fctx.Err()
	}, dlock.WithTTL(300*time.Millisecond))
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do after loss = %v, want the loss and fn's error", err)
	}
	if raw.Get(ctx, redisKey).Val() != "thief" {
		t.Fatal("Do deleted the new holder's key")
	}
	raw.Del(ctx, redisKey)

	// busy: the acquisition error, fn never runs
	other := newLocker(t, shared)
	held, err := other.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	err = dlock.Do(ctx, l, key, func(context.Context) error { t.Error("fn ran"); return nil }, dlock.WithWait(0))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Do on a busy key = %v", err)
	}
	held.Unlock(ctx)

	// nested Do on the same key re-enters through fn's owner
	err = dlock.Do(ctx, l, key, func(ctx context.Context) error {
		return dlock.Do(ctx, l, key, func(context.Context) error { return nil }, dlock.WithWait(0))
	})
	if err != nil {
		t.Fatalf("nested Do = %v", err)
	}
	if raw.Exists(ctx, redisKey).Val() != 0 {
		t.Fatal("nested Do left the key")
	}
}

func TestCloseReleasesAndStops(t *testing.T) {
	noLeak(t)
	ctx := context.Background()
	s := redistest.Start(t)
	raw := s.Client(t)
	c := redis.NewClient(s.Options())
	defer c.Close()
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	other := newLocker(t, s)
	for i := range 20 {
		if _, err := l.TryLock(ctx, fmt.Sprint("held:", i)); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := other.TryLock(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "busy")
		waiting <- err
	}()
	dlocktest.Eventually(t, 5*time.Second, "the waiter queues", func() bool { return raw.ZCard(ctx, "{dlock:lock:busy}:q").Val() == 1 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, waiting, 5*time.Second, "the waiter after Close"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiter after Close = %v", err)
	}
	if n := raw.Exists(ctx, "dlock:lock:held:0", "dlock:lock:held:19").Val(); n != 0 {
		t.Fatalf("%d locks still held after Close", n)
	}
	if n := raw.ZCard(ctx, "{dlock:lock:busy}:q").Val(); n != 0 {
		t.Fatal("the closed Locker's waiter is still queued")
	}
	busy.Unlock(ctx)
	other.Close()
}

func TestOrphan(t *testing.T) {
	ctx := context.Background()
	raw := shared.Client(t)
	l, err := New(shared.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Orphan(); err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), time.Second, "Done after Orphan")
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 1 {
		t.Fatal("Orphan released the lock")
	}
	raw.Del(ctx, "dlock:lock:"+key)
}

// 10,000 locks held for 10s with TTL 3s by one Locker: none is lost, and the
// goroutines stay few.
func TestTenThousandLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 10,000 locks for 10s; run without -short")
	}
	ctx := context.Background()
	s := redistest.Start(t)
	// Renewed every 3.3s, three times in the window: a lease of 3s left
	// too little room for renewals that a loaded machine (make test's other
	// packages beside it) delays, and two of the 10,000 lapsed.
	l := newLocker(t, s, dlock.WithTTL(10*time.Second))
	base := runtime.NumGoroutine()
	locks := holdMany(t, l, 10000)
	mid := runtime.NumGoroutine()
	time.Sleep(10 * time.Second) // the load: holding the locks while time passes
	peak := runtime.NumGoroutine()
	for _, lk := range locks {
		if err := lk.Err(); err != nil {
			t.Fatalf("lock %s lost: %v", lk.Key(), err)
		}
	}
	if n := s.Client(t).DBSize(ctx).Val(); n < 10000 {
		t.Fatalf("%d keys on the server", n)
	}
	t.Logf("goroutines: %d before, %d holding, %d after 10s (the Locker's share: %d)", base, mid, peak, peak-base)
	// The count does not grow with the locks: a renewal batch at a time,
	// idle request workers that a loaded machine has not yet retired.
	if peak-base > 50 {
		t.Fatalf("the Locker runs %d goroutines for 10,000 locks", peak-base)
	}
}

// holdMany acquires n locks concurrently.
func holdMany(t testing.TB, l *Locker, n int) []dlock.Lock {
	locks := make([]dlock.Lock, n)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() (err error) {
			locks[i], err = l.TryLock(context.Background(), "many:"+strconv.Itoa(i))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return locks
}

// BenchmarkRenew10k holds 10,000 locks with TTL 3s; each iteration is one
// renewal period (1s). It reports renewal round trips, script calls and
// client CPU per second.
func BenchmarkRenew10k(b *testing.B) {
	s := redistest.Start(b)
	hook := &counter{}
	c := s.Client(b)
	c.AddHook(hook)
	l, err := New(c, dlock.WithTTL(3*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	raw := s.Client(b)
	locks := holdMany(b, l, 10000)
	trips, renewals := hook.trips.Load(), calls(b, raw, "pexpire")
	cpu := cpuTime()
	start := time.Now()
	goroutines := 0
	for b.Loop() {
		time.Sleep(time.Second) // one renewal period of load
		goroutines = max(goroutines, runtime.NumGoroutine())
	}
	secs := time.Since(start).Seconds()
	for _, lk := range locks {
		if lk.Err() != nil {
			b.Fatalf("lost %s: %v", lk.Key(), lk.Err())
		}
	}
	b.ReportMetric(float64(hook.trips.Load()-trips)/secs, "rtt/s")
	b.ReportMetric(float64(calls(b, raw, "pexpire")-renewals)/secs, "renewals/s")
	b.ReportMetric(100*(cpuTime()-cpu).Seconds()/secs, "cpu%")
	b.ReportMetric(float64(goroutines), "goroutines")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The watchdog renews locks that fall due together in one batch: one
// script call on a single server, one pipeline for a Cluster (forced here,
// on a single server, to cover that path too), recovering from NOSCRIPT.
func TestRenewalsAreBatched(t *testing.T) {
	for _, oneServer := range []bool{true, false} {
		t.Run(fmt.Sprint("oneServer=", oneServer), func(t *testing.T) {
			t.Parallel() // a server of its own; it waits on renewals
			s := redistest.Start(t)
			hook := &counter{}
			c := s.Client(t)
			c.AddHook(hook)
			// Renewed every 500ms: at 600ms leases (200ms), make test's
			// load delayed a renewal past a deadline.
			const ttl = 1500 * time.Millisecond
			l, err := New(c, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.oneServer = oneServer
			locks := holdMany(t, l, 500)
			raw := s.Client(t)
			trips, before := hook.trips.Load(), calls(t, raw, "pexpire")
			time.Sleep(5 * ttl / 6) // two and a half renewal periods of load
			if err := s.ScriptFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * ttl / 6) // and as much again after NOSCRIPT
			renewals, rt := calls(t, raw, "pexpire")-before, hook.trips.Load()-trips
			for _, lk := range locks {
				if lk.Err() != nil {
					t.Fatalf("lost: %v", lk.Err())
				}
			}
			t.Logf("%d renewals in %d round trips", renewals, rt)
			if renewals < 500*3 {
				t.Fatalf("only %d renewals of 500 locks in five periods", renewals)
			}
			if rt*20 > renewals {
				t.Fatalf("%d round trips for %d renewals: not batched", rt, renewals)
			}
		})
	}
}

// renews reports whether cmd is a batch of the watchdog's renewals on one
// server: renew.lua, or renew_plain.lua for plain locks.
func renews(cmd redis.Cmder) bool { return renewScript.Runs(cmd) || renewPlain.Runs(cmd) }
