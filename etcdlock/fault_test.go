package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
)

// The fault tests run their own clusters, so that stopping a member harms
// no other test.

// slack absorbs scheduling noise on a loaded machine in the bounds below.
const slack = 2 * time.Second

// TestFaultServerStopped: with the only server stopped, a held lock is
// declared lost no later than its lease deadline (the last keep-alive
// answer plus the TTL), since nobody can renew it.
func TestFaultServerStopped(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	l := newLocker(t, c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	lk, err := l.TryLock(ctx, "fault:stop", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(0) // graceful: it may answer requests while it stops
	stopped := time.Now()
	select {
	case <-lk.Done():
	case <-time.After(ttl + slack):
		t.Fatalf("Done still open %v after the server stopped, past the lease deadline", ttl+slack)
	}
	if el := time.Since(stopped); el > ttl+slack {
		t.Errorf("Done closed %v after the server stopped, want within the %v lease", el, ttl)
	}
	if !errors.Is(lk.Err(), dlock.ErrLockLost) || !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
		t.Errorf("Err() = %v, want ErrLockLost and ErrLeaseExpired", lk.Err())
	}
}

// TestFaultLeaderStopped: in a three-member cluster, stopping the leader
// keeps a held lock (its keep-alive fails over, and the new leader extends
// leases), and a client waiting for the lock still gets it on release.
func TestFaultLeaderStopped(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartN(t, 3)
	a, b := newLocker(t, c.Client(t)), newLocker(t, c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	const key = "fault:leader"
	la, err := a.TryLock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var lb dlock.Lock
	go func() {
		var err error
		lb, err = b.Lock(ctx, key, dlock.WithWait(40*time.Second))
		got <- err
	}()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(leader)
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := la.TTL(ctx); err != nil {
		t.Fatalf("TTL after the failover: %v", err)
	}
	// The lock must outlive two of its leases under the new leader.
	select {
	case <-la.Done():
		t.Fatalf("the lock was lost after the leader stopped: %v", la.Err())
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	case <-time.After(2 * ttl):
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the failover: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not acquire after the release")
	}
	if lb.Fence() <= la.Fence() {
		t.Errorf("fence %d after the failover, want > %d", lb.Fence(), la.Fence())
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestFaultPartition cuts a client off from etcd with a loopback proxy
// (the partition) for longer than its lease. The client learns that its
// lock is lost by its local lease deadline; its waiting Lock returns at
// once when its session ends (etcd #19597) instead of waiting on; another
// client acquires once the server expires the lease; and after the
// partition heals the stale holder's Unlock deletes nothing.
func TestFaultPartition(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(c.Endpoint(0), "http://"))
	const ttl = 2 * time.Second
	// The holder and the waiter share the Locker's session (its TTL).
	a := newLocker(t, c.Client(t, proxy.Addr()), dlock.WithTTL(ttl))
	b := newLocker(t, c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la, err := a.TryLock(ctx, "fault:held")
	if err != nil {
		t.Fatal(err)
	}
	lbusy, err := b.TryLock(ctx, "fault:busy")
	if err != nil {
		t.Fatal(err)
	}
	defer lbusy.Unlock(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Lock(ctx, "fault:busy")
		waited <- err
	}()

	cut := time.Now()
	proxy.Cut()
	select {
	case <-la.Done():
	case <-time.After(ttl + slack):
		t.Fatal("the partitioned holder's Done is still open past its lease")
	}
	if !errors.Is(la.Err(), dlock.ErrLockLost) || !errors.Is(la.Err(), dlock.ErrLeaseExpired) {
		t.Errorf("Err() = %v, want ErrLockLost and ErrLeaseExpired", la.Err())
	}
	select {
	case err := <-waited:
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrLeaseExpired) {
			t.Errorf("the partitioned waiter: got %v, want ErrNotAcquired and ErrLeaseExpired", err)
		}
	case <-time.After(ttl + slack):
		t.Errorf("the partitioned waiter still waits past its session's lease, at %v", time.Since(cut))
		t.Fatalf("then: %v, at %v", <-waited, time.Since(cut))
	}
	lb, err := b.Lock(ctx, "fault:held", dlock.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("the other client: %v", err)
	}
	if el := time.Since(cut); el < ttl-time.Second {
		t.Errorf("the other client acquired %v after the cut, before the %v lease could run out", el, ttl)
	}
	proxy.Heal()
	if err := la.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the stale holder's Unlock: got %v, want ErrNotHeld", err)
	}
	if _, err := lb.TTL(ctx); err != nil {
		t.Errorf("the new holder after the stale Unlock: %v", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
