package postgreslock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// quietSessions counts the server's sessions whose last statement was an
// UNLISTEN of a Locker's channel: LISTEN sessions that stopped listening.
func quietSessions(t *testing.T, p *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND query LIKE 'UNLISTEN "dlock\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// handOff has a (holding key) release it to b, which waits for it with
// its fallback attempt a minute away, so that only the release's wake-up
// brings it the lock in time; it returns b's hold.
func handOff(t *testing.T, a, b *postgreslock.Locker, key string) dlock.Lock {
	t.Helper()
	ctx := context.Background()
	held, err := a.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := waiting(t, b, key, 1, dlock.WithTTL(time.Minute))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, got, 20*time.Second)
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d: the release granted it", lk.Fence(), held.Fence()+1)
	}
	return lk
}

// A Locker with nobody waiting or watching stops listening, so that the
// NOTIFYs of the database stop waking its session on the server; a
// waiter that comes later listens again, and a release wakes it.
func TestQuietLockerListensAgain(t *testing.T) {
	ctx := context.Background()
	p := pool(t, "")
	a := newLocker(t, p)
	b, err := postgreslock.New(pool(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	postgreslock.SetListenIdle(b, 100*time.Millisecond)
	t.Cleanup(func() { b.Close() })
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	if err := handOff(t, a, b, key+":1").Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	dlocktest.Eventually(t, 20*time.Second, "the idle Locker's session to stop listening", func() bool {
		return !postgreslock.Listening(b) && quietSessions(t, p) == 1
	})
	lk := handOff(t, a, b, key+":2")
	if !postgreslock.Listening(b) {
		t.Error("the waiter's Locker does not listen")
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter that comes while its Locker's session is stopping listening
// (it decided to, and has not sent UNLISTEN yet) does not register then:
// a release's NOTIFY would reach nobody once UNLISTEN is in force. The
// session listens again for it, and the waiter registers then, and the
// release wakes it, long before its fallback attempt a minute away.
func TestWaiterWhileQuieting(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, pool(t, ""))
	var c counter
	listen, err := pgx.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgreslock.New(countedPool(t, shared.URL(""), &c, 4), postgreslock.WithListen(listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	postgreslock.SetListenIdle(b, 100*time.Millisecond)
	quieting, gate := make(chan struct{}, 1), make(chan struct{})
	postgreslock.SetBeforeQuiet(b, func() {
		select {
		case quieting <- struct{}{}:
			<-gate
		default: // later quietings pass
		}
	})
	key := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	if err := handOff(t, a, b, key+":1").Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-quieting:
	case <-time.After(20 * time.Second):
		t.Fatal("the idle Locker's session did not decide to stop listening within 20s")
	}
	held, err := a.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		close(gate)
		t.Fatal(err)
	}
	got := make(chan lockResult, 1)
	before := c.done.Load()
	go func() {
		lk, err := b.Lock(ctx, key, dlock.WithWait(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Minute)))
		got <- lockResult{lk, err}
	}()
	dlocktest.Eventually(t, 20*time.Second, "the waiter's first attempt", func() bool { return c.done.Load() > before })
	info, err := a.Inspect(ctx, key)
	close(gate)
	if err != nil {
		t.Fatal(err)
	}
	if info.Waiters != 0 {
		t.Fatalf("%d waiters registered while the session was stopping listening; want 0", info.Waiters)
	}
	dlocktest.Eventually(t, 20*time.Second, "the waiter's registration once the session listens again", func() bool {
		info, err := a.Inspect(ctx, key)
		return err == nil && info.Waiters == 1
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := take(t, got, 20*time.Second)
	if lk.Fence() != held.Fence()+1 {
		t.Errorf("the waiter's fence is %d; want %d: the release granted it", lk.Fence(), held.Fence()+1)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
