package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// faults is a gRPC client interceptor that injects the faults of these
// tests into the calls of one client: a fault is a function of the method
// that runs around the call.
type faults struct {
	unary  atomic.Pointer[func(method string, call func() error) error]
	sent   atomic.Pointer[func(method string)]               // sees a stream's sends
	replay atomic.Pointer[func(method string) time.Duration] // delays a stream's replies
	late   atomic.Pointer[func(method string)]               // after a delayed reply
	refuse atomic.Pointer[func(method string) bool]          // fails a stream's sends
	stall  atomic.Pointer[func(method string) bool]          // loses a call's reply: it returns when its context ends
}

func (f *faults) client(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := shared.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			call := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
			if st := f.stall.Load(); st != nil && (*st)(method) {
				call()
				<-ctx.Done()
				return ctx.Err()
			}
			if u := f.unary.Load(); u != nil {
				return (*u)(method, call)
			}
			return call()
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &faultyStream{ClientStream: cs, f: f, method: method}, nil
		}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type faultyStream struct {
	grpc.ClientStream
	f      *faults
	method string
}

func (s *faultyStream) SendMsg(m any) error {
	if r := s.f.refuse.Load(); r != nil && (*r)(s.method) {
		return errors.New("send refused (injected)")
	}
	if f := s.f.sent.Load(); f != nil {
		(*f)(s.method)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *faultyStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if d := s.f.replay.Load(); d != nil {
		if late := (*d)(s.method); late > 0 {
			time.Sleep(late) // the injected fault: a reply that comes late
			if f := s.f.late.Load(); f != nil {
				(*f)(s.method)
			}
		}
	}
	return err
}

const keepAliveRPC = "/etcdserverpb.Lease/LeaseKeepAlive"

// A keep-alive whose reply comes late must not move the local deadline
// past the server's expiry, which counts from when etcd renewed the lease,
// after the request was sent: the deadline counts from the send.
func TestKeepAliveDeadlineFromSend(t *testing.T) {
	ctx := context.Background()
	var f faults
	l := newLocker(t, f.client(t), dlock.WithTTL(3*time.Second))
	start := time.Now()
	// From 500ms on, one keep-alive's reply comes 1.5s late, and none is
	// sent after it.
	var sentAt atomic.Pointer[time.Time]
	var delivered atomic.Bool
	sent := func(method string) {
		if method == keepAliveRPC && time.Since(start) > 500*time.Millisecond && sentAt.Load() == nil {
			now := time.Now()
			sentAt.Store(&now)
		}
	}
	var delaying atomic.Bool
	replay := func(method string) time.Duration {
		if method == keepAliveRPC && sentAt.Load() != nil && !delaying.Swap(true) {
			return 1500 * time.Millisecond
		}
		return 0
	}
	// After the late reply, no keep-alive reaches etcd: the deadline stays
	// the one that reply set.
	late := func(string) { delivered.Store(true) }
	refuse := func(method string) bool { return method == keepAliveRPC && delivered.Load() }
	f.sent.Store(&sent)
	f.replay.Store(&replay)
	f.late.Store(&late)
	f.refuse.Store(&refuse)
	lk, err := l.TryLock(ctx, "late-keepalive")
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the late reply to be filed: the deadline moves.
	deadline := time.Now().Add(10 * time.Second)
	before := etcdlock.LeaseDeadline(lk)
	for !delivered.Load() || etcdlock.LeaseDeadline(lk).Equal(before) {
		if !delivered.Load() {
			before = etcdlock.LeaseDeadline(lk)
		}
		if time.Now().After(deadline) {
			t.Fatal("no late keep-alive reply was filed")
		}
		time.Sleep(20 * time.Millisecond) // poll, bounded by the deadline
	}
	limit := sentAt.Load().Add(3*time.Second - 300*time.Millisecond)
	if d := etcdlock.LeaseDeadline(lk); d.After(limit) {
		t.Fatalf("local deadline %v after the keep-alive was sent, past the %v that etcd may give from its renewal",
			d.Sub(*sentAt.Load()), limit.Sub(*sentAt.Load()))
	}
}

// A lost acquire reply followed by a failed clean-up must not leave the key
// on the shared, renewed lease for the Locker's lifetime: the key is
// deleted once etcd answers again.
func TestLostAcquireReplyFailedCleanup(t *testing.T) {
	ctx := context.Background()
	var f faults
	l := newLocker(t, f.client(t))
	if _, err := l.TryLock(ctx, "warm-up"); err != nil { // the shared lease exists
		t.Fatal(err)
	}
	var failing atomic.Bool
	failing.Store(true)
	unary := func(method string, call func() error) error {
		switch {
		case !failing.Load():
			return call()
		case method == "/etcdserverpb.KV/Txn":
			call()
			return errors.New("reply lost (injected after the transaction ran)")
		case method == "/etcdserverpb.KV/DeleteRange":
			return errors.New("unavailable (injected)")
		}
		return call()
	}
	f.unary.Store(&unary)
	if _, err := l.TryLock(ctx, "orphan"); err == nil {
		t.Fatal("TryLock whose reply was lost succeeded")
	}
	failing.Store(false)
	other := newLocker(t, client(t))
	deadline := time.Now().Add(10 * time.Second)
	for {
		lk, err := other.TryLock(ctx, "orphan")
		if err == nil {
			lk.Unlock(ctx)
			return
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("another Locker cannot take the key the failed attempt wrote: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll, bounded by the deadline
	}
}

// A lease granted after its local deadline (etcd stalled past it) is of no
// use: it is revoked, not kept alive with nothing to hold. The reply comes
// 4.7s after the request, between the local deadline of a 5s lease and
// etcd's expiry of it.
func TestLateGrantRevoked(t *testing.T) {
	ctx := context.Background()
	var f faults
	unary := func(method string, call func() error) error {
		err := call()
		if method == "/etcdserverpb.Lease/LeaseGrant" {
			// the injected fault: the reply comes after the 5s lease's local
			// deadline (4.5s), before etcd would expire it
			time.Sleep(4700 * time.Millisecond)
		}
		return err
	}
	f.unary.Store(&unary)
	cli := f.client(t)
	l := newLocker(t, cli, dlock.WithTTL(5*time.Second))
	if _, err := l.TryLock(ctx, "late-grant"); err == nil {
		t.Fatal("TryLock on a lease granted too late succeeded")
	}
	f.unary.Store(nil)
	// Every lease of 5s must be gone: one kept alive outlives its TTL.
	c := client(t)
	deadline := time.Now().Add(8 * time.Second)
	for {
		leases, err := c.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		alive := 0
		for _, ls := range leases.Leases {
			if ttl, err := c.TimeToLive(ctx, ls.ID); err == nil && ttl.GrantedTTL == 5 && ttl.TTL > 0 {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lease(s) granted too late still kept alive after 8s", alive)
		}
		time.Sleep(100 * time.Millisecond) // poll, bounded by the deadline
	}
}

// After etcd stalls past a lease's deadline (its keep-alives are applied
// but answered too late), the holder declares the lock lost, and nothing
// may keep the lease alive any more: another Locker gets the key once etcd
// expires it, instead of never.
func TestStalledLeaseNotKeptAlive(t *testing.T) {
	ctx := context.Background()
	var f faults
	var stalled atomic.Bool
	replay := func(method string) time.Duration {
		if method == keepAliveRPC && stalled.Load() {
			return 4 * time.Second // the injected fault: etcd answers after the 3s lease's deadline
		}
		return 0
	}
	f.replay.Store(&replay)
	l := newLocker(t, f.client(t), dlock.WithTTL(3*time.Second))
	lk, err := l.TryLock(ctx, "stalled")
	if err != nil {
		t.Fatal(err)
	}
	stalled.Store(true)
	select {
	case <-lk.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never learned that its lease ended")
	}
	stalled.Store(false)
	other := newLocker(t, client(t))
	lb, err := other.Lock(ctx, "stalled", dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("another Locker: %v (the lost lease is still kept alive)", err)
	}
	lb.Unlock(ctx)
}

// WithNotify(false) makes a waiter poll: it opens no watch, so a release
// does not wake it, and it gets the lock only at its next attempt.
func TestNotifyOffPolls(t *testing.T) {
	ctx := context.Background()
	holder := newLocker(t, client(t))
	for _, notify := range []bool{true, false} {
		var f faults
		attempted := make(chan struct{}, 1)
		txn := func(method string, call func() error) error {
			err := call()
			if method == "/etcdserverpb.KV/Txn" {
				select {
				case attempted <- struct{}{}:
				default:
				}
			}
			return err
		}
		f.unary.Store(&txn)
		var watches atomic.Int32
		sent := func(method string) {
			if method == "/etcdserverpb.Watch/Watch" {
				watches.Add(1)
			}
		}
		f.sent.Store(&sent)
		waiter := newLocker(t, f.client(t))
		key := fmt.Sprintf("%s-%v", t.Name(), notify)
		lk, err := holder.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			lk  dlock.Lock
			err error
		}
		res := make(chan result, 1)
		go func() {
			w, err := waiter.Lock(ctx, key, dlock.WithNotify(notify), dlock.WithRetry(dlock.FixedInterval(time.Hour)), dlock.WithWait(time.Second))
			res <- result{w, err}
		}()
		<-attempted // the waiter found the lock busy
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		switch {
		case notify && (r.err != nil || watches.Load() == 0):
			t.Fatalf("with notify: Lock = %v after %d watch requests; want the lock, woken by a watch", r.err, watches.Load())
		case !notify && (!errors.Is(r.err, dlock.ErrNotAcquired) || watches.Load() != 0):
			t.Fatalf("without notify: Lock = %v after %d watch requests; want no watch, and ErrNotAcquired when the wait ends before the next poll", r.err, watches.Load())
		}
		if r.lk != nil {
			r.lk.Unlock(ctx)
		}
	}
}

// A Lock call returns at its WithWait limit even when an attempt's reply
// never comes (a leader election that takes long, a member that stopped):
// the attempt does not outlive the wait.
func TestWaitLimitBoundsAttempt(t *testing.T) {
	holder := newLocker(t, client(t))
	key := t.Name()
	if _, err := holder.TryLock(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	var f faults
	waiter := newLocker(t, f.client(t), dlock.WithRetry(dlock.FixedInterval(50*time.Millisecond)))
	txn := func(method string) bool { return method == "/etcdserverpb.KV/Txn" }
	f.stall.Store(&txn)
	defer f.stall.Store(nil) // so that the clean-up of the lost attempt ends
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := waiter.Lock(ctx, key, dlock.WithWait(500*time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("Lock with a 500ms wait returned only when its context ended after 10s: %v", err)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock = %v, want ErrNotAcquired at the wait's limit", err)
	}
}

// A hold stops watching its key when it is released: the Locker stays
// open, and nothing of the hold keeps running (its watch loop spun until
// Close, opening watches on a cancelled context, unless its last check of
// the key happened to come before its stop). Five holds, each seen
// watching (it watches once it lived a second) before its release.
func TestReleaseEndsWatch(t *testing.T) {
	l := newLocker(t, client(t))
	ctx := context.Background()
	watching := func() int {
		buf := make([]byte, 4<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "etcdlock.(*hold).watch(")
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("after 5s: %s (%d holds watching)", what, watching())
			}
			time.Sleep(time.Millisecond) // poll interval, bounded by deadline
		}
	}
	for i := range 5 {
		lk, err := l.TryLock(ctx, fmt.Sprintf("watch:%s:%d", t.Name(), i))
		if err != nil {
			t.Fatal(err)
		}
		until("the hold watches its key", func() bool { return watching() == 1 })
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		until("no hold watches after its release", func() bool { return watching() == 0 })
	}
}
