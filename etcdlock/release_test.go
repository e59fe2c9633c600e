package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDoReleaseCut: the holder is cut off from etcd while fn runs, so that
// Do's release cannot reach etcd; the partition then heals. The hold ends
// at the failed release (Done closed, Err saying it was given up, not
// lost), and another Locker gets the key within the TTL of the failed
// release, while the holder's Locker keeps its session and its other hold.
// (The key stayed on the session's lease, renewed until Close.)
func TestDoReleaseCut(t *testing.T) {
	t.Parallel()
	// The lease outlives the cut: Guard's release gives up after
	// driver.ReleaseTimeout, well before a keep-alive is overdue.
	const ttl = 20 * time.Second
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(shared.Endpoint(0), "http://"))
	defer proxy.Heal()
	a := newLocker(t, shared.Client(t, proxy.Addr()), dlock.WithTTL(ttl))
	b := newLocker(t, client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := "release:cut:" + driver.NewToken()[:6]
	other, err := a.TryLock(ctx, key+":other")
	if err != nil {
		t.Fatal(err)
	}

	var held dlock.Lock
	err = dlock.Do(ctx, a, key, func(ctx context.Context) error {
		held, _ = dlock.LockFrom(ctx)
		proxy.Cut()
		return nil
	})
	failed := time.Now()
	proxy.Heal()
	if err == nil {
		t.Fatal("Do's release reported success while cut off from etcd")
	}
	select {
	case <-held.Done():
		if e := held.Err(); !errors.Is(e, dlock.ErrNotHeld) || errors.Is(e, dlock.ErrLockLost) {
			t.Errorf("Err after the failed release: %v, want ErrNotHeld (given up), not ErrLockLost", e)
		}
	default:
		t.Errorf("Done still open after the release failed (%v)", err)
	}

	lb, err := b.Lock(ctx, key, dlock.WithWait(ttl+slack))
	if err != nil {
		t.Fatalf("another Locker, %v after the failed release (%v): %v", time.Since(failed), held.Err(), err)
	}
	if el := time.Since(failed); el > ttl+slack {
		t.Errorf("another Locker got the key %v after the failed release, past the %v TTL", el, ttl)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Error(err)
	}
	if _, err := other.TTL(ctx); err != nil {
		t.Errorf("the holder's other hold on its session after the partition healed: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// txnFault fails a client's reads, writes and transactions while on is
// set, as a server that never answers them would, and lets every other
// request through: lease keep-alives go on.
type txnFault struct{ on atomic.Bool }

func (f *txnFault) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if f.on.Load() && strings.HasPrefix(method, "/etcdserverpb.KV/") {
		return status.Error(codes.Unavailable, "test: the transaction went unanswered")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestUnlockFailedLapses: an Unlock whose transaction fails (as every
// request on keys does) while the
// holder's keep-alives still reach etcd ends the hold, and the key lapses
// within its TTL of the failure: a hold on the Locker's session stops
// that session's renewal until its key is known to be gone (here it never
// is, so the session lapses, and the Locker starts another), a hold with
// a lease of its own stops renewing that lease.
func TestUnlockFailedLapses(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	for _, tc := range []struct {
		name string
		opts []dlock.Option
	}{
		{"session", nil},
		{"own session", []dlock.Option{dlock.WithTTL(ttl + time.Second)}},
		{"pinned lease", []dlock.Option{dlock.WithLease(ttl)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var fault txnFault
			a := newLocker(t, faultyClient(t, fault.unary), dlock.WithTTL(ttl))
			b := newLocker(t, client(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "release:fail:" + driver.NewToken()[:6]
			lk, err := a.TryLock(ctx, key, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			fault.on.Store(true)
			err = lk.Unlock(ctx)
			failed := time.Now()
			if err == nil {
				t.Fatal("Unlock reported success with its transaction failed")
			}
			select {
			case <-lk.Done():
				if e := lk.Err(); !errors.Is(e, dlock.ErrNotHeld) || errors.Is(e, dlock.ErrLockLost) {
					t.Errorf("Err after the failed release: %v, want ErrNotHeld (given up), not ErrLockLost", e)
				}
			default:
				t.Errorf("Done still open after the release failed (%v)", err)
			}
			lb, err := b.Lock(ctx, key, dlock.WithWait(2*ttl+slack))
			if err != nil {
				t.Fatalf("another Locker, %v after the failed release: %v", time.Since(failed), err)
			}
			if el := time.Since(failed); el > ttl+slack {
				t.Errorf("another Locker got the key %v after the failed release, past the %v TTL", el, ttl)
			}
			lb.Unlock(ctx)
			// The holder's Locker goes on once etcd answers again.
			fault.on.Store(false)
			lk2, err := a.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("the holder's Locker after its failed release: %v", err)
			}
			if err := lk2.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}
