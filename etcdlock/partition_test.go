package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
)

// A holder cut off from etcd learns by its lease deadline that its lock is
// lost, whenever in the keep-alive cycle the cut comes. (The hold's key
// watch used to block in the client while the connection was down, so
// that the hold never saw its lease end.)
func TestPartitionLosesByDeadline(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	for i := range 4 {
		proxy := etcdtest.StartProxy(t, strings.TrimPrefix(shared.Endpoint(0), "http://"))
		l := newLocker(t, shared.Client(t, proxy.Addr()), dlock.WithTTL(ttl))
		lk, err := l.TryLock(context.Background(), fmt.Sprintf("partition:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		// Cut at a different point of the keep-alive cycle each time;
		// the wait stands in for no event, it only staggers the cut.
		time.Sleep(time.Duration(i) * ttl / 4)
		proxy.Cut()
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
				t.Errorf("cut %d: Err() = %v, want ErrLeaseExpired", i, lk.Err())
			}
		case <-time.After(ttl + slack):
			t.Fatalf("cut %d: Done still open %v after the cut, past the %v lease", i, ttl+slack, ttl)
		}
		proxy.Heal()
	}
}

// Close of a Locker cut off from etcd returns: the release fails, the
// session's lease is closed, and the hold ends with it.
func TestPartitionClose(t *testing.T) {
	t.Parallel()
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(shared.Endpoint(0), "http://"))
	l, err := etcdlock.New(shared.Client(t, proxy.Addr()), dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(context.Background(), "partition:close")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err == nil {
			t.Error("Close cut off from etcd reported no error for the release it could not make")
		}
	case <-time.After(3*driver.ReleaseTimeout + slack):
		t.Fatal("Close cut off from etcd did not return")
	}
	select {
	case <-lk.Done():
	default:
		t.Fatal("the hold is still open after Close")
	}
}
