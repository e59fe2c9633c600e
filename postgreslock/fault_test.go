package postgreslock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5"
)

// proxied returns a Locker whose statements go through a proxy that can
// lose replies; its LISTEN session goes to the server directly.
func proxied(t *testing.T, opts ...dlock.Option) (*postgreslock.Locker, *pgtest.Proxy) {
	t.Helper()
	px, err := pgtest.NewProxy(shared.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	p := pool(t, strings.Replace(shared.URL(""), shared.Addr(), px.Addr(), 1))
	direct, err := pgx.ParseConfig(shared.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	l, err := postgreslock.New(p, append(opts, postgreslock.WithListen(direct))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, px
}

func waitDropped(t *testing.T, px *pgtest.Proxy) {
	t.Helper()
	select {
	case <-px.Dropped():
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy dropped no reply")
	}
}

// A renewal that ran but whose reply was lost does not lose the lock: the
// renewal is keyed on the token, so it is sent again, and the hold stays
// held past the lease it had.
func TestRenewalReplyLost(t *testing.T) {
	a, px := proxied(t)
	ctx := context.Background()
	const ttl = 3 * time.Second // renewals on a loaded machine take their time
	lk, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	px.DropReplyTo("_holds AS h SET expires_at")
	waitDropped(t, px)
	time.Sleep(ttl) // past the lease: only a renewal after the lost one keeps it
	if lk.Err() != nil {
		t.Fatalf("after a lost renewal reply: %v; want held", lk.Err())
	}
	b := newLocker(t, pool(t, ""))
	if _, err := b.TryLock(ctx, t.Name()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another Locker: %v; want ErrNotAcquired", err)
	}
}

// A release that ran but whose reply was lost is sent again, finds the
// row gone, and returns nil: the key is free at once.
func TestReleaseReplyLost(t *testing.T) {
	a, px := proxied(t)
	ctx := context.Background()
	lk, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	px.DropReplyTo("_release(")
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with its reply lost: %v", err)
	}
	waitDropped(t, px)
	if !errors.Is(lk.Err(), dlock.ErrNotHeld) || errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err after Unlock: %v; want released", lk.Err())
	}
	b := newLocker(t, pool(t, ""))
	next, err := b.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("after the release: %v; want the key free", err)
	}
	next.Unlock(ctx)
}

// An acquisition that ran but whose reply was lost returns an error, and
// the row it wrote is deleted: the key is free long before its lease.
func TestAcquireReplyLost(t *testing.T) {
	a, px := proxied(t)
	ctx := context.Background()
	px.DropReplyTo("_acquire(")
	if lk, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(time.Minute)); err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with its reply lost: (%v, %v); want an error that is not ErrNotAcquired", lk, err)
	}
	waitDropped(t, px)
	b := newLocker(t, pool(t, ""))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := b.Lock(wctx, t.Name())
	if err != nil {
		t.Fatalf("the row of the lost acquisition stayed: %v", err)
	}
	next.Unlock(ctx)
}

// A server paused (SIGSTOP) past the lease: the holder is lost by its
// local deadline, before the server could hand the lock on; once it
// resumes another Locker takes the key with a greater fence, and the
// paused holder's fence is refused inside a transaction.
func TestServerPaused(t *testing.T) {
	ctx := context.Background()
	pa := pool(t, "")
	a := newLocker(t, pa)
	const ttl = 500 * time.Millisecond
	lk, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	shared.Pause()
	paused := time.Now()
	select {
	case <-lk.Done():
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		shared.Resume()
		t.Fatalf("the holder kept the lock while the server was paused\n%s", buf)
	}
	lostAfter := time.Since(paused)
	time.Sleep(ttl) // let the server's lease run out too
	shared.Resume()
	if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) || lostAfter > ttl {
		t.Fatalf("lost after %v with %v; want ErrLeaseExpired within %v", lostAfter, lk.Err(), ttl)
	}
	b := newLocker(t, pool(t, ""))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := b.Lock(wctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.Fence() <= lk.Fence() {
		t.Fatalf("fence %d after %d", next.Fence(), lk.Fence())
	}
	tx, err := pa.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := a.CheckFence(ctx, tx, t.Name(), lk.Fence()); !errors.Is(err, postgreslock.ErrFenceStale) {
		t.Fatalf("CheckFence of the paused holder: %v; want ErrFenceStale", err)
	}
}

// A server killed with SIGKILL and restarted keeps the table: the holder
// keeps its lock across the restart (its renewals come through once the
// server is back), others find it busy, and fences go on from where they
// were.
func TestServerKilled(t *testing.T) {
	s, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := s.URL("")
	if err := createTables(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := pool(t, url)
	a := newLocker(t, p)
	lk, err := a.TryLock(ctx, t.Name(), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	b := newLocker(t, pool(t, url))
	if _, err := b.TryLock(ctx, t.Name()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("after the restart: %v; want the key still held", err)
	}
	if lk.Err() != nil {
		t.Fatalf("the holder after the restart: %v", lk.Err())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the restart: %v", err)
	}
	next, err := b.TryLock(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.Fence() != lk.Fence()+1 {
		t.Fatalf("fence %d after %d; want the next", next.Fence(), lk.Fence())
	}
}

// A Lock whose wait runs out while the server answers nothing returns at
// its limit and a statement's grace, not once the server answers again
// (under the fault checker's load, a server restarting after a crash kept
// Lock calls with a 2s wait for 8s).
func TestWaitBoundedPausedServer(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, pool(t, ""))
	warm, err := l.TryLock(ctx, t.Name()+":warm") // a connection in the pool: the attempt is a statement
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const wait = 300 * time.Millisecond
	shared.Pause()
	defer shared.Resume()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := l.Lock(ctx, t.Name(), dlock.WithWait(wait))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("acquired while the server was paused")
		}
		if took := time.Since(start); took > wait+postgreslock.AttemptGrace+5*time.Second {
			t.Errorf("Lock returned after %v, want about %v", took, wait+postgreslock.AttemptGrace)
		}
	case <-time.After(wait + postgreslock.AttemptGrace + 10*time.Second):
		shared.Resume()
		t.Fatalf("Lock(WithWait(%v)) did not return in %v with the server paused", wait, wait+postgreslock.AttemptGrace+10*time.Second)
	}
}

// A Downgrade that ran but whose reply was lost is sent again, finds the
// row already a reader's, and succeeds: the handle is a read lock, as the
// row is.
func TestDowngradeReplyLost(t *testing.T) {
	a, px := proxied(t)
	ctx := context.Background()
	lk, err := a.TryWLock(ctx, t.Name(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	px.DropReplyTo("SET kind = 'r'")
	err = dlock.Downgrade(ctx, lk)
	waitDropped(t, px)
	if err != nil {
		t.Fatalf("Downgrade with its reply lost: %v; want nil (sent again)", err)
	}
	b := newLocker(t, pool(t, ""))
	r, err := b.TryRLock(ctx, t.Name())
	if err != nil {
		t.Fatalf("another owner's read lock after the downgrade: %v", err)
	}
	defer r.Unlock(ctx)
	if err := a.RUnlock(ctx, t.Name()); err != nil {
		t.Fatalf("RUnlock of the downgraded handle: %v; want nil", err)
	}
}
