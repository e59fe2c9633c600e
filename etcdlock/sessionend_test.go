package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Holds on the Locker's session register nothing with it: when the
// session ends (here an operator revokes its lease, which the next
// keep-alive finds gone), the session's end finds each hold on it and
// ends it as lost, whatever its kind, with no watch of its own (watches
// start after an hour here). A hold that Refresh moved to a lease of its
// own is not on the session any more, and lives on.
func TestSessionEndEndsItsHolds(t *testing.T) {
	admin := client(t)
	l := newLocker(t, client(t), dlock.WithTTL(3*time.Second))
	etcdlock.SetWatchAfter(l, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holds []dlock.Lock
	take := func(lk dlock.Lock, err error) dlock.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, lk)
		return lk
	}
	plain := take(l.TryLock(ctx, "sessionend:plain"))
	take(l.Lock(ctx, "sessionend:waited"))
	take(l.TryLock(ctx, "sessionend:owned", dlock.WithOwner("o")))
	take(l.Lock(ctx, "sessionend:owned", dlock.WithOwner("o")))
	take(l.Acquire(ctx, "sessionend:permit", 2))
	take(l.RLock(ctx, "sessionend:read"))
	take(l.WLock(ctx, "sessionend:write"))
	moved := take(l.TryLock(ctx, "sessionend:moved"))
	if err := moved.Refresh(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Get(ctx, l.RangeOf("sessionend:plain"), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the hold of %q: %v, %d keys", plain.Key(), err, len(resp.Kvs))
	}
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	for _, lk := range holds[:len(holds)-1] {
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), dlock.ErrLockLost) {
				t.Errorf("%s: Err %v, want ErrLockLost", lk.Key(), lk.Err())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still held 20s after its session's lease was revoked", lk.Key())
		}
	}
	if err := moved.Err(); err != nil {
		t.Errorf("a hold moved to a lease of its own ended with the session: %v", err)
	}
	if err := moved.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
