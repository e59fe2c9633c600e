package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// queued reports the waiters etcd holds for key's lock of kind k.
func queued(t *testing.T, l *etcdlock.Locker, k dlock.Kind, key string) int {
	t.Helper()
	info, err := l.InspectKind(context.Background(), k, key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Waiters
}

type acquired struct {
	lk  dlock.Lock
	err error
}

// goTake runs take on a goroutine of its own and sends its outcome.
func goTake(take func() (dlock.Lock, error)) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		lk, err := take()
		got <- acquired{lk, err}
	}()
	return got
}

// TestSemaphoreCrashedHolder: the permit of a holder whose lease ends
// without a release (revoked here, as etcd does when it expires) comes
// back to the waiter, and the holder's handle is lost.
func TestSemaphoreCrashedHolder(t *testing.T) {
	cli := client(t)
	a, b := newLocker(t, cli, dlock.WithTTL(5*time.Second)), newLocker(t, client(t))
	ctx := context.Background()
	key := "sem:crash:" + driver.NewToken()[:6]
	p, err := a.TryAcquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := goTake(func() (dlock.Lock, error) { return b.Acquire(ctx, key, 1, dlock.WithWait(20*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "queued", func() bool { return queued(t, b, dlock.KindSemaphore, key) == 1 })
	resp, err := cli.Get(ctx, b.BaseOf(dlock.KindSemaphore, key)+p.Token())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the permit's key: %v, %v", err, resp)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter, after the holder's lease ended: %v", r.err)
	}
	defer r.lk.Unlock(ctx)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the crashed holder's permit still reports held")
	}
	if !errors.Is(p.Err(), dlock.ErrLockLost) {
		t.Errorf("the crashed holder's Err: %v, want ErrLockLost", p.Err())
	}
	if r.lk.Fence() <= p.Fence() {
		t.Errorf("fence %d after the crash, want > %d", r.lk.Fence(), p.Fence())
	}
}

// TestSemaphoreLimitChange: a raised limit admits a waiter at once; a
// lowered one keeps the holders above it and admits nobody until fewer
// than the new limit hold.
func TestSemaphoreLimitChange(t *testing.T) {
	a, b, c := newLocker(t, client(t)), newLocker(t, client(t)), newLocker(t, client(t))
	ctx := context.Background()
	key := "sem:limit:" + driver.NewToken()[:6]
	p1, err := a.TryAcquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := goTake(func() (dlock.Lock, error) { return b.Acquire(ctx, key, 1, dlock.WithWait(20*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "queued", func() bool { return queued(t, c, dlock.KindSemaphore, key) == 1 })
	// Raised to 3: the newcomer and the waiter are both in.
	p3, err := c.TryAcquire(ctx, key, 3)
	if err != nil {
		t.Fatalf("a raised limit: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter after the limit was raised: %v", r.err)
	}
	p2 := r.lk
	info, err := c.InspectKind(ctx, dlock.KindSemaphore, key)
	if err != nil || info.Holds != 3 || info.Limit != 3 || info.Waiters != 0 {
		t.Fatalf("InspectKind: %+v, %v; want 3 of 3 permits out", info, err)
	}
	// Lowered to 1: three holders keep their permits.
	if lk, err := c.TryAcquire(ctx, key, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a lowered limit with three out: (%v, %v), want busy", lk, err)
	}
	got = goTake(func() (dlock.Lock, error) { return c.Acquire(ctx, key, 1, dlock.WithWait(20*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "queued", func() bool { return queued(t, a, dlock.KindSemaphore, key) >= 1 })
	for i, p := range []dlock.Lock{p1, p2, p3} {
		if p.Err() != nil {
			t.Fatalf("holder %d lost its permit when the limit was lowered: %v", i, p.Err())
		}
	}
	p1.Unlock(ctx)
	p2.Unlock(ctx)
	if lk, err := a.TryAcquire(ctx, key, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("one holder left at a limit of 1: (%v, %v), want busy", lk, err)
	}
	select {
	case r := <-got:
		t.Fatalf("a waiter got in with one holder at a limit of 1: %v", r.err)
	default:
	}
	p3.Unlock(ctx)
	r = <-got
	if r.err != nil {
		t.Fatalf("the waiter after the last holder left: %v", r.err)
	}
	r.lk.Unlock(ctx)
}

// TestSemaphoreExclusion: several Lockers take permits of a limit of 2
// over and over; never more than 2 inside, and a waiter's fence is the
// revision that admitted it, so fences grow in the order of admission.
func TestSemaphoreExclusion(t *testing.T) {
	ctx := context.Background()
	key := "sem:excl:" + driver.NewToken()[:6]
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		l := newLocker(t, client(t))
		wg.Go(func() {
			for range 10 {
				lk, err := l.Acquire(ctx, key, 2, dlock.WithWait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond) // the work
				inside.Add(-1)
				if err := lk.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d permits out at once, limit 2", m)
	}
}

// TestRWWriterNotStarved: readers on four Lockers take the read lock
// over and over, each holding it a few milliseconds, so that the key is
// nearly always read; a writer still gets in, for the readers that come
// after it queue behind it, and the readers go on after it.
func TestRWWriterNotStarved(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	key := "rw:starve:" + driver.NewToken()[:6]
	var reads, inside atomic.Int32
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 4 {
		l := newLocker(t, client(t))
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && i < 5000; i++ {
				lk, err := l.RLock(ctx, key, dlock.WithWait(30*time.Second))
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				reads.Add(1)
				inside.Add(1)
				time.Sleep(5 * time.Millisecond) // the work
				inside.Add(-1)
				lk.Unlock(context.Background())
			}
		})
	}
	dlocktest.Eventually(t, 10*time.Second, "reading", func() bool { return reads.Load() > 20 })
	w := newLocker(t, client(t))
	lk, err := w.WLock(ctx, key, dlock.WithWait(30*time.Second))
	if err != nil {
		t.Fatalf("the writer under constant reads: %v", err)
	}
	if n := inside.Load(); n != 0 {
		t.Errorf("%d readers inside with the writer", n)
	}
	n := reads.Load()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	dlocktest.Eventually(t, 10*time.Second, "reading after the writer", func() bool { return reads.Load() > n+3 })
}

// TestRWDowngradeNoGap: a writer that downgrades keeps its key from write
// to read without a revision in which the key is absent; a second writer
// that queued meanwhile gets in only after the downgraded hold is
// released, and a reader queued between them enters at the downgrade.
func TestRWDowngradeNoGap(t *testing.T) {
	cli := client(t)
	a, b, c := newLocker(t, cli), newLocker(t, client(t)), newLocker(t, client(t))
	ctx := context.Background()
	key := "rw:downgrade:" + driver.NewToken()[:6]
	w, err := a.WLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	name := a.BaseOf(dlock.KindRWLock, key) + w.Token()
	wch := cli.Watch(ctx, name, clientv3.WithRev(int64(w.Fence())+1))
	reader := goTake(func() (dlock.Lock, error) { return b.RLock(ctx, key, dlock.WithWait(30*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "reader queued", func() bool { return queued(t, a, dlock.KindRWLock, key) == 1 })
	writer := goTake(func() (dlock.Lock, error) { return c.WLock(ctx, key, dlock.WithWait(30*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "writer queued", func() bool { return queued(t, a, dlock.KindRWLock, key) == 2 })

	if err := dlock.Downgrade(ctx, w); err != nil {
		t.Fatal(err)
	}
	r := <-reader
	if r.err != nil {
		t.Fatalf("the reader queued before the downgrade: %v", r.err)
	}
	if w.Err() != nil {
		t.Fatalf("the downgraded hold: %v", w.Err())
	}
	if err := dlock.Downgrade(ctx, w); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("a second Downgrade: %v, want ErrInvalidOption", err)
	}
	r.lk.Unlock(ctx)
	if queued(t, a, dlock.KindRWLock, key) != 1 {
		t.Fatal("the second writer left the queue while the downgraded hold is held")
	}
	if err := a.RUnlock(ctx, key); err != nil {
		t.Fatalf("RUnlock of the downgraded hold: %v", err)
	}
	wr := <-writer
	if wr.err != nil {
		t.Fatal(wr.err)
	}
	defer wr.lk.Unlock(ctx)
	// The key went from writer to reader by one put, and was deleted only
	// by the release, before the second writer's fence.
	var evs []*clientv3.Event
	for len(evs) < 2 {
		resp := <-wch
		evs = append(evs, resp.Events...)
	}
	if evs[0].Type != mvccpb.PUT || evs[0].Kv.CreateRevision != int64(w.Fence()) || evs[1].Type != mvccpb.DELETE {
		t.Fatalf("events of the write key: %v, want a put that keeps it, then the release", evs)
	}
	if wr.lk.Fence() <= uint64(evs[1].Kv.ModRevision) {
		t.Errorf("the second writer's fence %d is not after the release at %d", wr.lk.Fence(), evs[1].Kv.ModRevision)
	}
}

// TestRWReentrancy: an owner that holds the read lock takes it again
// while a writer waits, without waiting; the writer gets in once both
// holds are released. The owner's write lock admits its own read lock.
func TestRWReentrancy(t *testing.T) {
	a, b := newLocker(t, client(t)), newLocker(t, client(t))
	ctx := context.Background()
	key := "rw:owner:" + driver.NewToken()[:6]
	octx := dlock.ContextWithOwner(ctx, "owner-"+driver.NewToken())
	r1, err := a.RLock(octx, key)
	if err != nil {
		t.Fatal(err)
	}
	writer := goTake(func() (dlock.Lock, error) { return b.WLock(ctx, key, dlock.WithWait(30*time.Second)) })
	dlocktest.Eventually(t, 10*time.Second, "writer queued", func() bool { return queued(t, a, dlock.KindRWLock, key) == 1 })
	r2, err := b.TryRLock(octx, key)
	if err != nil {
		t.Fatalf("the owner's second read while a writer waits: %v", err)
	}
	if _, err := a.TryRLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("a newcomer's read while a writer waits: %v, want busy", err)
	}
	r1.Unlock(octx)
	select {
	case r := <-writer:
		t.Fatalf("the writer got in while the owner's second read is held: %v", r.err)
	default:
	}
	if info, err := a.InspectKind(ctx, dlock.KindRWLock, key); err != nil || info.Readers != 1 || info.Waiters != 1 {
		t.Fatalf("InspectKind: %+v, %v; want one reader and the writer waiting", info, err)
	}
	r2.Unlock(octx)
	wr := <-writer
	if wr.err != nil {
		t.Fatal(wr.err)
	}
	wr.lk.Unlock(ctx)

	w, err := a.TryWLock(octx, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.TryRLock(octx, key)
	if err != nil {
		t.Fatalf("the writing owner's read: %v", err)
	}
	if _, err := b.TryRLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("another reader while the owner writes: %v, want busy", err)
	}
	r.Unlock(octx)
	w.Unlock(octx)
	if _, err := a.TryRLock(ctx, key); err != nil {
		t.Errorf("a read after the owner left: %v", err)
	}
	if lk, err := a.TryWLock(ctx, key); !errors.Is(err, dlock.ErrUpgrade) {
		t.Errorf("the Locker's ownerless write over its own read: (%v, %v), want ErrUpgrade", lk, err)
	}
}

// TestPrimsWaitZero: WithWait(0) makes one attempt, as TryLock does, for
// every kind of hold.
func TestPrimsWaitZero(t *testing.T) {
	l := newLocker(t, client(t))
	ctx := context.Background()
	key := "prims:wait0:" + driver.NewToken()[:6]
	for name, take := range map[string]func() (dlock.Lock, error){
		"Acquire": func() (dlock.Lock, error) { return l.Acquire(ctx, key, 1, dlock.WithWait(0)) },
		"RLock":   func() (dlock.Lock, error) { return l.RLock(ctx, key, dlock.WithWait(0)) },
		"WLock":   func() (dlock.Lock, error) { return l.WLock(ctx, key+":w", dlock.WithWait(0)) },
	} {
		lk, err := take()
		if err != nil {
			t.Errorf("%s with WithWait(0) on a free key: %v", name, err)
			continue
		}
		lk.Unlock(ctx)
	}
}
