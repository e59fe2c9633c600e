package postgreslock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5"
)

// waiting starts l.Lock(key) on a goroutine, with its fallback attempt a
// minute away (only a release's hand-off brings the lock), and returns
// its result's channel once the waiter is registered (n waiters in all).
func waiting(t *testing.T, l dlock.Locker, key string, n int, opts ...dlock.Option) <-chan lockResult {
	t.Helper()
	got := make(chan lockResult, 1)
	go func() {
		lk, err := l.Lock(context.Background(), key, append([]dlock.Option{dlock.WithWait(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Minute))}, opts...)...)
		got <- lockResult{lk, err}
	}()
	in := newLocker(t, pool(t, ""))
	dlocktest.Eventually(t, 20*time.Second, "the waiter's registration", func() bool {
		info, err := in.Inspect(context.Background(), key)
		return err == nil && info.Waiters == n
	})
	return got
}

type lockResult struct {
	lk  dlock.Lock
	err error
}

// take waits up to d for a waiting call's result, and fails t when it
// has none or an error.
func take(t *testing.T, got <-chan lockResult, d time.Duration) dlock.Lock {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		return r.lk
	case <-time.After(d):
		t.Fatalf("the waiter did not get the lock within %v", d)
	}
	return nil
}

// A release hands the lock to the first waiter in the same transaction:
// the waiter's wake-up names its fence, and it sends no acquisition of
// its own.
func TestHandOffGrantsTheFirstWaiter(t *testing.T) {
	ctx := context.Background()
	var c counter
	w := newLocker(t, countedPool(t, shared.URL(""), &c, 4))
	a := newLocker(t, pool(t, ""))
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := waiting(t, w, t.Name(), 1, dlock.WithTTL(time.Minute))
	before := c.n.Load()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, got, 20*time.Second)
	defer lk.Unlock(ctx)
	if sent := c.n.Load() - before; sent != 0 {
		t.Errorf("the waiter sent %d statements between the release and holding the lock; want 0 (the release grants it)", sent)
	}
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d, one above the releaser's", lk.Fence(), held.Fence()+1)
	}
	other := newLocker(t, pool(t, ""))
	if _, err := other.TryLock(ctx, t.Name()); err == nil {
		t.Fatal("another Locker took the key the waiter holds")
	}
}

// stalledListen returns a Locker whose LISTEN session goes through a
// proxy (pinged after ping of silence), and the proxy.
func stalledListen(t *testing.T, ping time.Duration) (*postgreslock.Locker, *pgtest.Proxy) {
	t.Helper()
	px, err := pgtest.NewProxy(shared.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	listen, err := pgx.ParseConfig(strings.Replace(shared.URL(""), shared.Addr(), px.Addr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, pool(t, ""), postgreslock.WithListen(listen))
	postgreslock.SetListenPing(l, ping)
	return l, px
}

// A waiter whose LISTEN session went silent misses the NOTIFY of its
// grant: the session's replacement wakes it, and its attempt takes the
// granted hold, long before the hold's lease would let it lapse.
func TestHandOffNotifyLost(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, pool(t, ""))
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, px := stalledListen(t, 500*time.Millisecond)
	got := waiting(t, b, t.Name(), 1, dlock.WithTTL(time.Minute))
	px.Stall() // the NOTIFY of the grant is lost
	start := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, got, 30*time.Second)
	defer lk.Unlock(ctx)
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d: the release granted it", lk.Fence(), held.Fence()+1)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the waiter took %v; want well within the grant's lease of a minute", d)
	}
	dlocktest.Eventually(t, 20*time.Second, "a second LISTEN session, after the silent first", func() bool { return postgreslock.ListenSessions(b) >= 2 })
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the granted hold: %v", err)
	}
}

// A waiter that stops waiting after a release granted it the lock, its
// NOTIFY lost, hands the hold on as it leaves: the waiter behind it gets
// the lock at once, not when the grant's lease of a minute ends.
func TestHandOffLeaverHandsOn(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, pool(t, ""))
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, px := stalledListen(t, time.Minute) // no ping: the session stays silent
	bctx, cancel := context.WithCancel(ctx)
	bgot := make(chan error, 1)
	go func() {
		_, err := b.Lock(bctx, t.Name(), dlock.WithTTL(time.Minute), dlock.WithWait(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		bgot <- err
	}()
	in := newLocker(t, pool(t, ""))
	dlocktest.Eventually(t, 20*time.Second, "the first waiter's registration", func() bool {
		info, err := in.Inspect(ctx, t.Name())
		return err == nil && info.Waiters == 1
	})
	c := newLocker(t, pool(t, ""))
	cgot := waiting(t, c, t.Name(), 2, dlock.WithTTL(time.Minute))
	px.Stall()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	dlocktest.Eventually(t, 20*time.Second, "the grant to the first waiter", func() bool {
		info, err := in.Inspect(ctx, t.Name())
		return err == nil && info.Held && info.Waiters == 1
	})
	cancel()
	if err := <-bgot; err == nil {
		t.Fatal("the first waiter got the lock; want its call ended by its context")
	}
	lk := take(t, cgot, 30*time.Second)
	defer lk.Unlock(ctx)
	if lk.Fence() != held.Fence()+2 {
		t.Errorf("the second waiter's fence is %d; want %d (the first waiter's grant took %d)", lk.Fence(), held.Fence()+2, held.Fence()+1)
	}
}

// A grant to a waiter that died (its registration is there, nobody
// listens for it) lapses at its lease, and the next waiter takes the lock
// then.
func TestHandOffDeadWaiterLapses(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Second
	if _, err := p.Exec(ctx, `INSERT INTO dlock_waiters (name, waiter, kind, until, token, ttl_ms) VALUES ($1, 'gone.1', 'l', now() + interval '1 minute', 'gone-token', $2)`,
		a.NameOf(t.Name()), lease.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	c := newLocker(t, pool(t, ""))
	// It attempts again every second (the fallback): nothing wakes it
	// when the grant lapses.
	cgot := waiting(t, c, t.Name(), 2, dlock.WithRetry(dlock.FixedInterval(100*time.Millisecond)))
	start := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, cgot, 30*time.Second)
	defer lk.Unlock(ctx)
	if d := time.Since(start); d < lease-100*time.Millisecond {
		t.Errorf("the next waiter got the lock %v after the release; want after the dead waiter's grant lapsed (%v)", d, lease)
	}
	if lk.Fence() != held.Fence()+2 {
		t.Errorf("the next waiter's fence is %d; want %d (the dead waiter's grant took %d)", lk.Fence(), held.Fence()+2, held.Fence()+1)
	}
}

// A release that granted the lock but whose reply was lost is sent
// again, finds its row gone and returns nil; the waiter holds the lock
// with the fence the grant made, once.
func TestHandOffReleaseReplyLost(t *testing.T) {
	a, px := proxied(t)
	ctx := context.Background()
	held, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	w := newLocker(t, pool(t, ""))
	got := waiting(t, w, t.Name(), 1, dlock.WithTTL(time.Minute))
	px.DropReplyTo("_release(")
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with its reply lost: %v", err)
	}
	waitDropped(t, px)
	lk := take(t, got, 20*time.Second)
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d", lk.Fence(), held.Fence()+1)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("the waiter's Unlock: %v", err)
	}
	next, err := a.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("after the waiter's release: %v; want the key free", err)
	}
	if next.Fence() != held.Fence()+2 {
		t.Errorf("the next fence is %d; want %d", next.Fence(), held.Fence()+2)
	}
	next.Unlock(ctx)
}
