package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/redislock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestNewBadInput(t *testing.T) {
	cli := client(t)
	tests := []struct {
		name string
		cli  *clientv3.Client
		opts []dlock.Option
		want error
		text string
	}{
		{"nil client", nil, nil, dlock.ErrNilClient, "nil client"},
		{"TTL below a second", cli, []dlock.Option{dlock.WithTTL(500 * time.Millisecond)}, dlock.ErrInvalidTTL, "whole seconds"},
		{"zero TTL", cli, []dlock.Option{dlock.WithTTL(0)}, dlock.ErrInvalidTTL, "ttl"},
		{"fair mode", cli, []dlock.Option{dlock.WithFair(true)}, dlock.ErrInvalidOption, "fair"},
		{"empty prefix", cli, []dlock.Option{dlock.WithPrefix("")}, dlock.ErrInvalidOption, "prefix"},
		{"replica acknowledgement", cli, []dlock.Option{redislock.WithReplicaAck(1, time.Second)}, dlock.ErrInvalidOption, "an option of redislock"},
	}
	for _, tc := range tests {
		l, err := etcdlock.New(tc.cli, tc.opts...)
		if l != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: New = (%v, %v), want an error matching %v that says %q", tc.name, l, err, tc.want, tc.text)
		}
	}
}

func TestTTLBelowASecond(t *testing.T) {
	l := newLocker(t, client(t))
	ctx := context.Background()
	if _, err := l.TryLock(ctx, "replica:ack", redislock.WithReplicaAck(1, time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("TryLock with WithReplicaAck: got %v, want ErrInvalidOption", err)
	}
	_, err := l.TryLock(ctx, "ttl:short", dlock.WithTTL(999*time.Millisecond))
	if !errors.Is(err, dlock.ErrInvalidTTL) || !strings.Contains(err.Error(), "etcd leases are whole seconds") {
		t.Errorf("TryLock with a 999ms TTL: got %v, want ErrInvalidTTL saying etcd leases are whole seconds", err)
	}
}

// leaseOf returns the granted TTL of the lease that holds lk in etcd.
func leaseOf(t *testing.T, cli *clientv3.Client, l *etcdlock.Locker, lk dlock.Lock) time.Duration {
	t.Helper()
	ctx := context.Background()
	resp, err := cli.Get(ctx, l.RangeOf(lk.Key())+lk.Token())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get the hold of %q: %v, %d keys", lk.Key(), err, len(resp.Kvs))
	}
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ttl.GrantedTTL) * time.Second
}

func TestTTLRoundedUp(t *testing.T) {
	cli := client(t)
	l := newLocker(t, cli)
	ctx := context.Background()
	for _, tc := range []struct {
		opt  dlock.Option
		want time.Duration
	}{
		{dlock.WithLease(1500 * time.Millisecond), 2 * time.Second},
		{dlock.WithTTL(2001 * time.Millisecond), 3 * time.Second},
		{dlock.WithTTL(4 * time.Second), 4 * time.Second},
	} {
		lk, err := l.TryLock(ctx, "ttl:round", tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		if got := leaseOf(t, cli, l, lk); got != tc.want {
			t.Errorf("granted lease %v, want %v", got, tc.want)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeyLayout: holds live under "<prefix>/lock/<key>/", with '/' and
// '%' escaped so that no key's range holds another key's.
func TestKeyLayout(t *testing.T) {
	cli := client(t)
	l := newLocker(t, cli, dlock.WithPrefix("app"))
	ctx := context.Background()
	if got, want := l.RangeOf("order/42%"), "app/lock/order%2F42%25/"; got != want {
		t.Errorf("Prefix = %q, want %q", got, want)
	}
	inner, err := l.TryLock(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Unlock(ctx)
	outer, err := l.TryLock(ctx, "a")
	if err != nil {
		t.Fatalf("key %q is busy while only %q is held: %v", "a", "a/b", err)
	}
	defer outer.Unlock(ctx)
	resp, err := cli.Get(ctx, "app/lock/a/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != "app/lock/a/"+outer.Token() {
		t.Errorf("range of %q: %v, %v", "a", resp, err)
	}
}

// TestStaleUnlockSameSession is etcd #22082: one session acquires, releases
// and acquires again; a repeated Unlock of the first hold must not delete
// the second (the Mutex deletes by key name, which both share).
func TestStaleUnlockSameSession(t *testing.T) {
	l := newLocker(t, client(t))
	ctx := context.Background()
	first, err := l.TryLock(ctx, "stale")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := l.TryLock(ctx, "stale")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("repeated Unlock: got %v, want ErrNotHeld", err)
	}
	if _, err := second.TTL(ctx); err != nil || second.Err() != nil {
		t.Errorf("the second hold after a stale Unlock: TTL error %v, Err %v", err, second.Err())
	}
	if err := second.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestSessions: locks with the Locker's TTL share one lease; a lock with
// another TTL gets a lease of its own, revoked when it is released.
func TestSessions(t *testing.T) {
	cli := client(t)
	l := newLocker(t, cli, dlock.WithTTL(5*time.Second))
	ctx := context.Background()
	lease := func(lk dlock.Lock) int64 {
		resp, err := cli.Get(ctx, l.RangeOf(lk.Key())+lk.Token())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %q: %v", lk.Key(), err)
		}
		return resp.Kvs[0].Lease
	}
	a, err := l.TryLock(ctx, "sess:a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryLock(ctx, "sess:b")
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.TryLock(ctx, "sess:c", dlock.WithTTL(7*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lease(a) != lease(b) {
		t.Error("two locks with the Locker's TTL have different leases")
	}
	own := lease(c)
	if own == lease(a) {
		t.Error("a lock with another TTL shares the Locker's session")
	}
	if err := c.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := cli.TimeToLive(ctx, clientv3.LeaseID(own)); err != nil || r.TTL > 0 {
		t.Errorf("the lease of a released lock: TTL %v, %v; want revoked", r.TTL, err)
	}
	a.Unlock(ctx)
	b.Unlock(ctx)
}
