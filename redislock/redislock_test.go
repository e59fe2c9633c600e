package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestAcquireReleaseRefresh(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	raw := shared.Client(t)

	lk, err := a.TryLock(ctx, key, dlock.WithLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lk.Key() != key || len(lk.Token()) < 22 || lk.Fence() != 0 {
		t.Fatalf("handle: key %q token %q fence %d, want no fence without WithFencing", lk.Key(), lk.Token(), lk.Fence())
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != lk.Token() {
		t.Fatalf("Redis value of the lock = %q, want the token %q", got, lk.Token())
	}

	// A bare SET NX PX does not ask how long the holder has left; a
	// scripted attempt (here a fenced one) does.
	for _, c := range []struct {
		opts      []dlock.Option
		withRetry bool
	}{{nil, false}, {[]dlock.Option{dlock.WithFencing(true)}, true}} {
		_, err = b.TryLock(ctx, key, c.opts...)
		var busy *dlock.NotAcquiredError
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.As(err, &busy) {
			t.Fatalf("TryLock of a held key: %v, want a *NotAcquiredError", err)
		}
		if busy.Key != key || (busy.RetryAfter > 0) != c.withRetry || busy.RetryAfter > 2*time.Second {
			t.Fatalf("busy error: key %q retry-after %v, want one: %v", busy.Key, busy.RetryAfter, c.withRetry)
		}
	}

	if err := lk.Refresh(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	ttl, err := lk.TTL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 2*time.Second || ttl > 5*time.Second {
		t.Fatalf("TTL after Refresh(5s) = %v", ttl)
	}

	select {
	case <-lk.Done():
		t.Fatal("Done closed while held")
	default:
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), time.Second, "Done after Unlock")
	if err := lk.Err(); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Err after Unlock = %v, want ErrNotHeld", err)
	}
	if n := raw.Exists(ctx, "dlock:lock:"+key).Val(); n != 0 {
		t.Fatal("lock key still there after Unlock")
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	if err := lk.Refresh(ctx, time.Second); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Refresh after Unlock = %v, want ErrNotHeld", err)
	}
	if _, err := lk.TTL(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("TTL after Unlock = %v, want ErrNotHeld", err)
	}
	// An unfenced lock leaves nothing behind but its own key, and that
	// goes with its release.
	if n := raw.Exists(ctx, "{dlock:lock:"+key+"}:m", "{dlock:lock:"+key+"}:q", "{dlock:lock:"+key+"}:w").Val(); n != 0 {
		t.Fatalf("%d sibling keys left by an unfenced lock", n)
	}
	lk2, err := b.TryLock(ctx, key, dlock.WithFencing(true))
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if lk2.Fence() == 0 {
		t.Fatal("a fenced TryLock returned no fence")
	}
}

func TestExpiryHandOver(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	lk, err := a.TryLock(ctx, key, dlock.WithLease(100*time.Millisecond), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	// The waiter's retry interval is far longer than the lease: it must be
	// woken by the holder's remaining TTL, not its interval.
	start := time.Now()
	lk2, err := b.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(10*time.Second)), dlock.WithWait(5*time.Second), dlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("expiry hand-over took %v", el)
	}
	within(t, lk.Done(), 2*time.Second, "the expired holder's Done")
	if err := lk.Err(); !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrLeaseExpired) {
		t.Fatalf("expired holder's Err = %v, want lost with ErrLeaseExpired", err)
	}
	if lk2.Fence() <= lk.Fence() {
		t.Fatalf("fence after expiry %d <= %d", lk2.Fence(), lk.Fence())
	}
}

// Seed 003's first hazard: A1 lock, A1 unlock, A2 lock, A1 renew. The stale
// renewal must fail and leave A2's lease alone.
func TestHazardStaleRenew(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	raw := shared.Client(t)
	a1, err := a.TryLock(ctx, key, dlock.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Keep A1's token, as a stale renewal from an old process would have it.
	stale := a.newLock(driver.HoldLock, key, a1.(*hold).keys, a1.Token(), "", false, time.Second)
	a.tables.Locks.Add(stale) // held, as the stale process believes
	if err := a1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a2, err := b.TryLock(ctx, key, dlock.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Refresh(ctx, time.Hour); !errors.Is(err, dlock.ErrOwnershipLost) {
		t.Fatalf("stale renew = %v, want ErrOwnershipLost", err)
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != a2.Token() {
		t.Fatalf("A2's lock value = %q, want %q", got, a2.Token())
	}
	if pttl := raw.PTTL(ctx, "dlock:lock:"+key).Val(); pttl > time.Second {
		t.Fatalf("stale renew extended A2's lease to %v", pttl)
	}
}

// Seed 003's second hazard: A1 lock, A1 expires, A2 lock, A1 unlock. The
// late unlock must fail and leave A2's lock in place.
func TestHazardLateUnlock(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	raw := shared.Client(t)
	a1, err := a.TryLock(ctx, key, dlock.WithLease(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	dlocktest.Eventually(t, 2*time.Second, "A1's key expires", func() bool { return raw.Exists(ctx, "dlock:lock:"+key).Val() == 0 })
	a2, err := b.TryLock(ctx, key, dlock.WithLease(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	err = a1.Unlock(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("late unlock = %v, want ErrNotHeld", err)
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != a2.Token() {
		t.Fatalf("A2's lock value = %q, want %q", got, a2.Token())
	}
}

// A stolen lock: the key was deleted and someone else took it. Unlock must
// say so and delete nothing.
func TestUnlockStolen(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, shared)
	key := keyFor(t)
	raw := shared.Client(t)
	lk, err := a.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "dlock:lock:"+key)
	raw.Set(ctx, "dlock:lock:"+key, "someone-else", time.Minute)
	err = lk.Unlock(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrOwnershipLost) {
		t.Fatalf("Unlock of a stolen lock = %v, want ErrNotHeld and ErrOwnershipLost", err)
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != "someone-else" {
		t.Fatalf("the other holder's value = %q", got)
	}
}

// A client that follows redis.io's single-instance algorithm with raw
// commands on the same key contends correctly with dlock.
func TestWireCompatibility(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	key := keyFor(t)
	redisKey := "dlock:lock:" + key
	raw := shared.Client(t)
	const rawRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

	// raw holds: dlock is refused
	if ok := raw.SetNX(ctx, redisKey, "raw-token", time.Minute).Val(); !ok {
		t.Fatal("raw SET NX on a free key failed")
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("dlock TryLock while a raw client holds: %v", err)
	}
	if n := raw.Eval(ctx, rawRelease, []string{redisKey}, "raw-token").Val(); n != int64(1) {
		t.Fatalf("raw release = %v", n)
	}

	// dlock holds: raw is refused, and raw's release with a wrong token does nothing
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if ok := raw.SetNX(ctx, redisKey, "raw-token", time.Minute).Val(); ok {
		t.Fatal("raw SET NX succeeded while dlock holds")
	}
	if n := raw.Eval(ctx, rawRelease, []string{redisKey}, "raw-token").Val(); n != int64(0) {
		t.Fatalf("raw release of dlock's lock = %v", n)
	}
	// raw can release dlock's lock when it knows the token: same protocol
	if n := raw.Eval(ctx, rawRelease, []string{redisKey}, lk.Token()).Val(); n != int64(1) {
		t.Fatalf("raw release with dlock's token = %v", n)
	}
	// within its lease, the handle cannot tell that release from a re-sent
	// one of its own: the lock is free, as Unlock asks
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after a raw release = %v, want nil", err)
	}
	// a raw lock set without an expiry still reads as busy, with no hint
	raw.Set(ctx, redisKey, "forever", 0)
	_, err = l.TryLock(ctx, key)
	var busy *dlock.NotAcquiredError
	if !errors.As(err, &busy) || busy.RetryAfter != 0 {
		t.Fatalf("TryLock over a key without TTL: %v", err)
	}
	raw.Del(ctx, redisKey)
}

func TestNoScript(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	l := newLocker(t, s)
	key := keyFor(t)

	check := func(what string) {
		t.Helper()
		lk, err := l.TryLock(ctx, key, dlock.WithLease(time.Minute))
		if err != nil {
			t.Fatalf("%s: TryLock: %v", what, err)
		}
		if err := s.ScriptFlush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("%s: Refresh: %v", what, err)
		}
		if err := s.ScriptFlush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TTL(ctx); err != nil {
			t.Fatalf("%s: TTL: %v", what, err)
		}
		if err := s.ScriptFlush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", what, err)
		}
	}
	check("before any fault")
	if err := s.ScriptFlush(ctx); err != nil {
		t.Fatal(err)
	}
	check("after SCRIPT FLUSH")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	check("after a restart")

	// the watchdog's pipelined renewals recover too
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ScriptFlush(ctx); err != nil {
		t.Fatal(err)
	}
	c := s.Client(t)
	// three renewal periods: the key must still be ours
	deadline := time.Now().Add(450 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := c.Get(ctx, "dlock:lock:"+key).Val(); got != lk.Token() {
			t.Fatalf("lock lost after SCRIPT FLUSH: value %q, Err %v", got, lk.Err())
		}
		time.Sleep(20 * time.Millisecond) // sampling the key while time passes
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestContextCancelWhileWaiting(t *testing.T) {
	ctx := context.Background()
	hook := &counter{}
	c := shared.Client(t)
	c.AddHook(hook)
	a := newLocker(t, shared)
	b, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := keyFor(t)
	if _, err := a.TryLock(ctx, key); err != nil {
		t.Fatal(err)
	}

	for _, notify := range []bool{true, false} {
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		trips := hook.trips.Load()
		go func() {
			_, err := b.Lock(cctx, key, dlock.WithNotify(notify), dlock.WithRetry(dlock.FixedInterval(time.Hour)))
			errc <- err
		}()
		// let it start waiting, then cancel: it must return at once,
		// without waiting out its hour-long retry interval
		dlocktest.Eventually(t, 5*time.Second, "the waiter queues", func() bool {
			if notify {
				return shared.Client(t).ZCard(ctx, "{dlock:lock:"+key+"}:q").Val() == 1
			}
			return hook.trips.Load() > trips
		})
		cancel()
		err := within(t, errc, 5*time.Second, "Lock after cancel")
		if !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("notify=%v: Lock after cancel = %v, want Canceled and ErrNotAcquired", notify, err)
		}
	}
	if n := shared.Client(t).ZCard(ctx, "{dlock:lock:"+key+"}:q").Val(); n != 0 {
		t.Fatalf("a cancelled waiter stayed in the queue (%d entries)", n)
	}

	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = b.Lock(dctx, key)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock past its deadline = %v, want DeadlineExceeded and ErrNotAcquired", err)
	}
	_, err = b.Lock(ctx, key, dlock.WithWait(50*time.Millisecond))
	if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past WithWait = %v, want ErrNotAcquired alone", err)
	}
	_, err = b.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(time.Millisecond).WithMaxAttempts(3)))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock past its attempts = %v, want ErrNotAcquired", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	raw := shared.Client(t)
	if _, err := New(nil); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("New(nil) = %v, want ErrNilClient", err)
	}
	if _, err := New((*redis.Client)(nil)); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("New(nil *redis.Client) = %v, want ErrNilClient", err)
	}
	for _, opts := range [][]dlock.Option{
		{dlock.WithPrefix("a{b}")},
		{dlock.WithPrefix("")},
		{dlock.WithTTL(0)},
		{dlock.WithLogger(nil)},
	} {
		if _, err := New(raw, opts...); err == nil {
			t.Errorf("New with a bad option succeeded")
		}
	}
	l := newLocker(t, shared)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		key  string
		opts []dlock.Option
		ctx  context.Context
		want error
	}{
		{"empty key", "", nil, ctx, dlock.ErrInvalidKey},
		{"key over 1 KiB", strings.Repeat("k", dlock.MaxKeyLen+1), nil, ctx, dlock.ErrInvalidKey},
		{"unroutable brace", "a}b", nil, ctx, dlock.ErrInvalidKey},
		{"empty hash tag", "{}x", nil, ctx, dlock.ErrInvalidKey},
		{"zero ttl", key, []dlock.Option{dlock.WithTTL(0)}, ctx, dlock.ErrInvalidTTL},
		{"negative ttl", key, []dlock.Option{dlock.WithTTL(-time.Second)}, ctx, dlock.ErrInvalidTTL},
		{"ttl below 1ms", key, []dlock.Option{dlock.WithTTL(time.Microsecond)}, ctx, dlock.ErrInvalidTTL},
		{"negative wait", key, []dlock.Option{dlock.WithWait(-1)}, ctx, dlock.ErrInvalidOption},
		{"bad retry", key, []dlock.Option{dlock.WithRetry(dlock.FixedInterval(0))}, ctx, dlock.ErrInvalidOption},
		{"prefix per call", key, []dlock.Option{dlock.WithPrefix("x")}, ctx, dlock.ErrInvalidOption},
		{"cancelled context", key, nil, cancelled, context.Canceled},
	}
	for _, c := range cases {
		for name, call := range map[string]func(context.Context, string, ...dlock.Option) (dlock.Lock, error){"TryLock": l.TryLock, "Lock": l.Lock} {
			lk, err := call(c.ctx, c.key, c.opts...)
			if !errors.Is(err, c.want) || lk != nil {
				t.Errorf("%s with %s: (%v, %v), want %v", name, c.name, lk, err, c.want)
			}
		}
	}
	if keys := raw.Keys(ctx, "*"+key+"*").Val(); len(keys) != 0 {
		t.Errorf("bad input wrote keys: %v", keys)
	}
	if err := l.Unlock(ctx, key); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Locker.Unlock of a key not held = %v", err)
	}
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Refresh(ctx, 0); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("Refresh(0) = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "dlock:lock:"+key).Val(); n != 0 {
		t.Error("Close left a held lock behind")
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("TryLock after Close = %v", err)
	}
	if _, err := l.Lock(ctx, key); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Lock after Close = %v", err)
	}
	if err := l.Unlock(ctx, key); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Unlock after Close = %v", err)
	}
	if err := l.Close(); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
	if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock of a handle released by Close = %v", err)
	}
}

// A release whose reply is lost, then retried, must not report a false
// ErrNotHeld, nor release the lock of whoever took the key since.
func TestReleaseRetryAfterTimeout(t *testing.T) {
	ctx := context.Background()
	hook := &counter{}
	c := shared.Client(t)
	c.AddHook(hook)
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	timeout := errors.New("i/o timeout (injected after the command ran)")
	once := func(cmd redis.Cmder) error {
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			return timeout
		}
		return nil
	}
	hook.fail.Store(&once)
	if err := lk.Unlock(ctx); !errors.Is(err, timeout) {
		t.Fatalf("first Unlock = %v, want the injected timeout", err)
	}
	hook.fail.Store(nil)
	if n := c.Exists(ctx, "dlock:lock:"+key).Val(); n != 0 {
		t.Fatal("the first release did not run")
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock = %v, want nil", err)
	}

	// and a retry after someone else took the key leaves their lock alone
	lk, err = l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	hook.fail.Store(&once)
	lk.Unlock(ctx)
	hook.fail.Store(nil)
	other := newLocker(t, shared)
	theirs, err := other.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock = %v, want nil", err)
	}
	if got := c.Get(ctx, "dlock:lock:"+key).Val(); got != theirs.Token() {
		t.Fatalf("the new holder's lock is gone: %q", got)
	}
}
