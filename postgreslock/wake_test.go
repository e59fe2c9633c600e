package postgreslock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
)

// A waiter registers for a release's wake-up only once its Locker's
// LISTEN session is up: before, the release's NOTIFY would reach nobody,
// and the waiter would take the lock on the session's coming up as if
// the release had not woken it.
func TestWaiterRegistersOnceListening(t *testing.T) {
	ctx := context.Background()
	listen, err := pgx.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var d net.Dialer
	listen.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return d.DialContext(ctx, network, addr)
	}
	var c counter
	a, err := postgreslock.New(countedPool(t, shared.URL(""), &c, 4), postgreslock.WithListen(listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := newLocker(t, pool(t, ""))
	holder, err := b.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lk  dlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		// The fallback attempt a minute away: only a wake-up brings the lock.
		lk, err := a.Lock(ctx, t.Name(), dlock.WithWait(30*time.Second), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		got <- result{lk, err}
	}()
	dlocktest.Eventually(t, 20*time.Second, "the waiter's first attempt", func() bool { return c.done.Load() >= 1 })
	info, err := b.Inspect(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if info.Waiters != 0 {
		t.Fatalf("%d waiters registered while the waiter's LISTEN session was down; want 0", info.Waiters)
	}
	close(gate)
	dlocktest.Eventually(t, 20*time.Second, "the waiter's registration", func() bool {
		info, err := b.Inspect(ctx, t.Name())
		return err == nil && info.Waiters == 1
	})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		r.lk.Unlock(ctx)
	case <-time.After(20 * time.Second):
		t.Fatal("the release did not wake the waiter within 20s")
	}
}

// A LISTEN session that fails to come up wakes no waiter: nothing was
// missed, as none was up, and the waiters poll meanwhile. Only a session
// that was up and ended, and one that comes up, make them attempt again.
// The first connections are refused, each only once the waiter had time
// to act on a wake-up; then the session comes up.
func TestFailedListenConnectWakesNobody(t *testing.T) {
	ctx := context.Background()
	listen, err := pgx.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	const refused = 3
	var dials atomic.Int32
	var d net.Dialer
	listen.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n := dials.Add(1)
		// The waiter's first attempt, and one after each refusal before
		// this dial if refusals woke it: give it the chance.
		for deadline := time.Now().Add(300 * time.Millisecond); c.done.Load() < int64(n) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n <= refused {
			return nil, errors.New("refused by the test")
		}
		return d.DialContext(ctx, network, addr)
	}
	a, err := postgreslock.New(countedPool(t, shared.URL(""), &c, 4), postgreslock.WithListen(listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := newLocker(t, pool(t, ""))
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano()) // a key of its own each run
	holder, err := b.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	wctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	defer func() { cancel(); <-ended }()
	go func() {
		defer close(ended)
		// The fallback attempt a minute away: only wake-ups bring attempts.
		if lk, err := a.Lock(wctx, key, dlock.WithRetry(dlock.FixedInterval(time.Minute))); err == nil {
			lk.Unlock(ctx)
		}
	}()
	dlocktest.Eventually(t, 20*time.Second, "the waiter's registration once the session is up", func() bool {
		info, err := b.Inspect(ctx, key)
		return err == nil && info.Waiters == 1
	})
	if got := c.n.Load(); got != 2 {
		t.Fatalf("the waiter sent %d attempts over %d refused LISTEN connections and one that came up; want 2 (its first, and one once the session is up)", got, refused)
	}
}

// A waiter registered for a release's wake-up, its LISTEN session up,
// needs its fallback attempt only for a wake-up lost, so it comes a third
// of the TTL after the last, not every second: with hundreds of waiters,
// their polls would be most of the statements per hand-off. Its
// registration lasts until past that attempt.
func TestRegisteredWaiterPollsAtAThirdOfTheTTL(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, pool(t, ""))
	b := newLocker(t, pool(t, ""))
	holder, err := b.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	const ttl = 9 * time.Second
	got := waiting(t, a, t.Name(), 1, dlock.WithTTL(ttl), dlock.WithRetry(dlock.FixedInterval(10*time.Millisecond)))
	var left time.Duration
	if err := pool(t, "").QueryRow(ctx, `SELECT until - now() FROM dlock_waiters WHERE name = $1`, a.NameOf(t.Name())).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 2*ttl/3 {
		t.Errorf("the waiter's registration lasts %v more; want more than %v: it attempts again a third of the TTL (%v) after the last", left.Round(time.Millisecond), 2*ttl/3, ttl/3)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	take(t, got, 20*time.Second).Unlock(ctx)
}
