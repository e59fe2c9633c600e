package etcdlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lateDelete holds back the first delete of a key (a DeleteRange, or a
// transaction) that a client sends once armed, and delivers it to etcd
// when let go: a request delayed on its way, as a slow link or a member
// that forwards it late can delay it. With answer, the caller gets an
// error at once, as when its deadline passes first (the outcome is
// unknown); else the caller waits for the delivery.
type lateDelete struct {
	armed  atomic.Bool
	answer bool
	held   chan struct{} // closed when a request is held back
	let    chan struct{} // closed by the test to deliver it
	done   chan error    // the delivered request's outcome
}

func newLateDelete(answer bool) *lateDelete {
	return &lateDelete{answer: answer, held: make(chan struct{}), let: make(chan struct{}), done: make(chan error, 1)}
}

func (f *lateDelete) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if (method != "/etcdserverpb.KV/DeleteRange" && method != "/etcdserverpb.KV/Txn") || !f.armed.CompareAndSwap(true, false) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	close(f.held)
	deliver := func() error {
		<-f.let
		err := invoker(context.Background(), method, req, reply, cc, opts...)
		f.done <- err
		return err
	}
	if !f.answer {
		return deliver()
	}
	go deliver()
	return status.Error(codes.Unavailable, "test: the delete is on its way, late")
}

// lateClient returns a Locker, with watches started after an hour, over a
// client of the shared cluster whose deletes f can hold back.
func lateClient(t *testing.T, f *lateDelete) *etcdlock.Locker {
	l := newLocker(t, faultyClient(t, f.unary), dlock.WithTTL(time.Minute))
	etcdlock.SetWatchAfter(l, time.Hour)
	return l
}

// stillHeld fails t unless the etcd key of lk is there, created by lk's
// acquisition, and lk releases it.
func stillHeld(t *testing.T, l *etcdlock.Locker, lk dlock.Lock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t).Get(ctx, l.RangeOf(lk.Key())+lk.Token())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || uint64(resp.Kvs[0].CreateRevision) != lk.Fence() {
		t.Fatalf("the newer hold's key (fence %d) after the older hold's late delete landed: %v", lk.Fence(), resp.Kvs)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("the newer hold's Unlock: %v", err)
	}
}

// A release whose outcome is unknown (its delete went out, no answer came
// back) and whose delete lands late, after the Locker took the key again,
// deletes nothing of the newer hold: the session's holds reuse one name
// per key (see names.go), but not one whose delete may still land.
func TestLateReleaseSparesNewerHold(t *testing.T) {
	t.Parallel()
	f := newLateDelete(true)
	l := lateClient(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "late:unknown:" + driver.NewToken()[:6]
	older, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	f.armed.Store(true)
	if err := older.Unlock(ctx); err == nil {
		t.Fatal("Unlock reported success with its delete held back")
	}
	<-f.held
	// The Locker deletes the key in the background meanwhile; once that
	// delete landed, nothing is pending that would keep a name from reuse.
	dlocktest.Eventually(t, 30*time.Second, "the background delete of the older hold's key", func() bool {
		return etcdlock.DeletesPending(l) == 0
	})
	newer, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	close(f.let)
	if err := <-f.done; err != nil {
		t.Fatalf("the late delete: %v", err)
	}
	stillHeld(t, l, newer)
}

// A hold that ends (here its key was deleted by someone else, which a TTL
// call finds) while its release is on its way: the release's delete,
// landing late, deletes nothing of a newer hold that the Locker took
// meanwhile.
func TestReleaseInFlightSparesNewerHold(t *testing.T) {
	t.Parallel()
	f := newLateDelete(false)
	l := lateClient(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "late:inflight:" + driver.NewToken()[:6]
	older, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	f.armed.Store(true)
	released := make(chan error, 1)
	go func() { released <- older.Unlock(ctx) }()
	<-f.held
	if _, err := client(t).Delete(ctx, l.RangeOf(key), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := older.TTL(ctx); err == nil {
		t.Fatal("TTL of a hold whose key is gone reported no error")
	}
	<-older.Done()
	newer, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	close(f.let)
	if err := <-f.done; err != nil {
		t.Fatalf("the late delete: %v", err)
	}
	if err := <-released; err == nil {
		t.Error("the older hold's Unlock reported success after its key was deleted by someone else")
	} else if !strings.Contains(err.Error(), key) {
		t.Errorf("the older hold's Unlock: %v, want an error naming the key", err)
	}
	stillHeld(t, l, newer)
}

// A name is retired only when a delete by name alone may land late: the
// compared transactions of UnlockAfter leave the session's token, which
// the Locker's later holds keep reusing (see names.go).
func TestUnlockAfterKeepsNames(t *testing.T) {
	l := newLocker(t, client(t), dlock.WithTTL(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "late:lapse:" + driver.NewToken()[:6]
	first, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.(interface {
		UnlockAfter(context.Context, time.Duration) error
	}).UnlockAfter(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	next, err := l.TryLock(ctx, key+":next")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.Token() != first.Token() {
		t.Errorf("the hold after an UnlockAfter is named %q, not the session's %q: the name was retired", next.Token(), first.Token())
	}
}
