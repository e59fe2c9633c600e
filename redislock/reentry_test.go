package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
)

// Fences rise strictly over 10,000 acquisitions of one key by 8 goroutines
// on 2 Lockers, and keep rising after the key expires.
func TestFenceStrictlyIncreasing(t *testing.T) {
	ctx := context.Background()
	lockers := []*Locker{newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))}
	key := keyFor(t)
	const total, workers = 10000, 8
	var (
		mu     sync.Mutex
		last   uint64
		count  atomic.Int64
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lockers[w%2]
			for count.Load() < total {
				lk, err := l.Lock(ctx, key, dlock.WithOwner(string(rune('a'+w))))
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				mu.Lock()
				if lk.Fence() <= last {
					t.Errorf("fence %d after %d", lk.Fence(), last)
				}
				last = lk.Fence()
				mu.Unlock()
				count.Add(1)
				inside.Add(-1)
				if err := lk.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	lk, err := lockers[0].TryLock(ctx, key, dlock.WithLease(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	within(t, lk.Done(), 2*time.Second, "the lease ends")
	dlocktest.Eventually(t, 2*time.Second, "the key expires", func() bool { return shared.Client(t).Exists(ctx, "dlock:lock:"+key).Val() == 0 })
	after, err := lockers[1].TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if after.Fence() <= lk.Fence() || lk.Fence() <= last {
		t.Fatalf("fences %d, then %d after expiry, then %d", last, lk.Fence(), after.Fence())
	}
	after.Unlock(ctx)
}

func TestReentrantByOwner(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared, dlock.WithFencing(true))
	raw := shared.Client(t)
	key := keyFor(t)
	redisKey := "dlock:lock:" + key
	octx := dlock.ContextWithOwner(ctx, "req-7")

	first, err := l.TryLock(octx, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Lock(octx, key, dlock.WithWait(0))
	if err != nil {
		t.Fatalf("re-acquire by the same owner: %v", err)
	}
	if second.Fence() <= first.Fence() || second.Token() == first.Token() {
		t.Fatalf("second hold: fence %d token %q; first: %d %q", second.Fence(), second.Token(), first.Fence(), first.Token())
	}
	if _, err := l.TryLock(dlock.ContextWithOwner(ctx, "someone-else"), key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner: %v, want ErrNotAcquired", err)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("no owner: %v, want ErrNotAcquired", err)
	}
	// Locker.Unlock with the owner releases the newest hold
	if err := l.Unlock(octx, key); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second.Err(), dlock.ErrNotHeld) {
		t.Fatalf("Locker.Unlock released the wrong hold: second.Err() = %v", second.Err())
	}
	if raw.Exists(ctx, redisKey).Val() != 1 {
		t.Fatal("key deleted while a hold remains")
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, redisKey).Val() != 0 {
		t.Fatal("key kept after the last hold")
	}
	if err := l.Unlock(octx, key); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Locker.Unlock with no hold left = %v", err)
	}
}

// Distributed reentrancy: two processes act for one owner. The first to
// release must not delete the key while the other still holds it (a
// hand-rolled reentrant lock that counts holds in one place gets this
// wrong).
func TestReentrantAcrossLockers(t *testing.T) {
	ctx := dlock.ContextWithOwner(context.Background(), "trace-42")
	p1, p2 := newLocker(t, shared), newLocker(t, shared)
	other := newLocker(t, shared)
	raw := shared.Client(t)
	key := keyFor(t)

	h1, err := p1.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := p2.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("second process of the same owner: %v", err)
	}
	if err := h1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 1 {
		t.Fatal("the first release deleted the key while the second process holds it")
	}
	if _, err := other.TryLock(context.Background(), key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("an outsider acquired while the owner holds: %v", err)
	}
	// a retried release of h1 counts nothing twice
	if err := h1.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock of h1 = %v", err)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 1 {
		t.Fatal("a double release of one hold freed the key")
	}
	// the shared lease is renewed by the remaining holder
	ttl, err := h2.TTL(ctx)
	if err != nil || ttl <= 0 {
		t.Fatalf("TTL of the remaining hold: %v, %v", ttl, err)
	}
	if err := h2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "dlock:lock:"+key).Val() != 0 {
		t.Fatal("key kept after both holds were released")
	}
	if _, err := other.TryLock(context.Background(), key); err != nil {
		t.Fatalf("outsider after release: %v", err)
	}
}

// Without an owner, a Locker refuses a second hold of a key it holds, even
// under 64 concurrent callers: exactly one wins.
func TestAlreadyHeldUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	key := keyFor(t)
	var (
		wins, held atomic.Int32
		wg         sync.WaitGroup
		start      = make(chan struct{})
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := l.TryLock(ctx, key)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, dlock.ErrAlreadyHeld):
				held.Add(1)
			default:
				t.Errorf("unexpected %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || held.Load() != 63 {
		t.Fatalf("%d won, %d got ErrAlreadyHeld; want 1 and 63", wins.Load(), held.Load())
	}
	if _, err := l.Lock(ctx, key); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("Lock of a held key = %v, want ErrAlreadyHeld at once", err)
	}
	if err := l.Unlock(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, key); err != nil {
		t.Fatalf("TryLock after Locker.Unlock: %v", err)
	}
}
