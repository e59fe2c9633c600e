package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// waitFor starts l.Lock in a goroutine and returns its result channel.
func waitFor(ctx context.Context, l *Locker, key string, opts ...dlock.Option) <-chan dlock.Lock {
	got := make(chan dlock.Lock, 1)
	go func() {
		lk, err := l.Lock(ctx, key, opts...)
		if err != nil {
			close(got)
			return
		}
		got <- lk
	}()
	return got
}

// heldWithWaiter has holder take key and waiter wait for it, retrying every
// retry, until the waiter is queued. It returns the holder's lock and where
// the waiter's will arrive.
func heldWithWaiter(t testing.TB, holder, waiter *Locker, key string, retry time.Duration) (dlock.Lock, <-chan dlock.Lock) {
	t.Helper()
	lk, err := holder.TryLock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	got := waitFor(context.Background(), waiter, key, dlock.WithRetry(dlock.FixedInterval(retry)))
	queued(t, shared, key, 1)
	return lk, got
}

// acquiredWithin fails t unless the Lock started by waitFor succeeds
// within d, and returns its lock.
func acquiredWithin(t testing.TB, got <-chan dlock.Lock, d time.Duration, what string) dlock.Lock {
	t.Helper()
	lk := within(t, got, d, what)
	if lk == nil {
		t.Fatalf("%s: Lock failed", what)
	}
	return lk
}

func queued(t testing.TB, s *redistest.Server, key string, n int64) {
	t.Helper()
	c := s.Client(t)
	dlocktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d waiters queued", n), func() bool {
		return c.ZCard(context.Background(), "{dlock:lock:"+key+"}:q").Val() == n
	})
}

// A waiter whose retry interval is 10s acquires within 2s of the release: a
// bound only the wake-up can meet.
func TestWakeOnRelease(t *testing.T) {
	ctx := context.Background()
	holder, waiter := newLocker(t, shared, dlock.WithFencing(true)), newLocker(t, shared, dlock.WithFencing(true))
	key := keyFor(t)
	lk, got := heldWithWaiter(t, holder, waiter, key, 10*time.Second)
	released := time.Now()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := acquiredWithin(t, got, 2*time.Second, "the waiter after release")
	t.Logf("handed over in %v", time.Since(released))
	if next.Fence() <= lk.Fence() {
		t.Fatal("fence did not rise")
	}
	next.Unlock(ctx)
}

// Only one waiter of a Locker wakes per release; the others keep waiting.
func TestWakeOnePerRelease(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder, waiter := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	lk, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var gots []<-chan dlock.Lock
	for i := range 3 {
		gots = append(gots, waitFor(dlock.ContextWithOwner(ctx, fmt.Sprint("w", i)), waiter, key, dlock.WithRetry(dlock.FixedInterval(10*time.Second))))
		queued(t, shared, key, int64(i+1))
	}
	lk.Unlock(ctx)
	first := within(t, gots[0], 2*time.Second, "the first waiter")
	if first == nil {
		t.Fatal("first waiter failed")
	}
	select {
	case lk := <-gots[1]:
		t.Fatalf("a second waiter acquired while the first holds: %v", lk)
	case lk := <-gots[2]:
		t.Fatalf("a third waiter acquired while the first holds: %v", lk)
	case <-time.After(200 * time.Millisecond): // observation window
	}
	first.Unlock(ctx)
	second := within(t, gots[1], 2*time.Second, "the second waiter")
	second.Unlock(ctx)
	third := within(t, gots[2], 2*time.Second, "the third waiter")
	third.Unlock(ctx)
}

// A lost wake-up costs at most the fallback sleep.
func TestLostWakeUp(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)

	t.Run("dropped", func(t *testing.T) {
		holder, waiter := newLocker(t, shared), newLocker(t, shared)
		waiter.notify.Drop.Store(true)
		lk, got := heldWithWaiter(t, holder, waiter, key, 300*time.Millisecond)
		lk.Unlock(ctx)
		next := acquiredWithin(t, got, 3*time.Second, "the waiter whose wake-up was dropped")
		next.Unlock(ctx)
	})

	t.Run("subscriber killed", func(t *testing.T) {
		holder, waiter := newLocker(t, shared), newLocker(t, shared)
		lk, got := heldWithWaiter(t, holder, waiter, key, 300*time.Millisecond)
		if err := shared.Client(t).Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		lk.Unlock(ctx)
		next := acquiredWithin(t, got, 3*time.Second, "the waiter whose subscriber was killed")
		next.Unlock(ctx)
	})
}

// A holder that crashes (its Locker gone, the key left to expire) does not
// strand a waiter.
func TestHolderCrash(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	crashed, err := New(shared.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crashed.TryLock(ctx, key, dlock.WithTTL(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	crashed.Orphan() // no release, no renewal: as if the process died
	waiter := newLocker(t, shared)
	lk, err := waiter.Lock(ctx, key, dlock.WithRetry(dlock.FixedInterval(10*time.Second)), dlock.WithWait(5*time.Second))
	if err != nil {
		raw := shared.Client(t)
		t.Fatalf("%v (lock value %q, pttl %v)", err, raw.Get(ctx, "dlock:lock:"+key).Val(), raw.PTTL(ctx, "dlock:lock:"+key).Val())
	}
	lk.Unlock(ctx)
}

// Fair mode serves waiters in arrival order.
func TestFairOrder(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	holder := newLocker(t, shared)
	lk, err := holder.TryLock(ctx, key, dlock.WithFair(true))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		l := newLocker(t, shared)
		got := waitFor(ctx, l, key, dlock.WithFair(true))
		queued(t, shared, key, int64(i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk, ok := <-got
			if !ok {
				t.Errorf("waiter %d failed", i)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			lk.Unlock(ctx)
		}()
	}
	lk.Unlock(ctx)
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("served in order %v, want 0..4", order)
		}
	}
}

// A release wakes only the Locker of the waiter it grants the lock to:
// each Locker hears grants on a channel of its own, so a hot key with many
// waiting processes costs one wake-up per hand-off, not one per process.
func TestWakeOnlyTheGrantee(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	holder, a, b := newLocker(t, shared), newLocker(t, shared), newLocker(t, shared)
	lk, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	queue := "{dlock:lock:" + key + "}:q"
	ps := shared.Client(t).SSubscribe(ctx, queue, queue+":"+a.sub, queue+":"+b.sub)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	slow := dlock.WithRetry(dlock.FixedInterval(10 * time.Second))
	gotA := waitFor(ctx, a, key, slow)
	queued(t, shared, key, 1)
	gotB := waitFor(ctx, b, key, slow)
	queued(t, shared, key, 2)

	// next returns the channel of the next grant message.
	next := func() string {
		t.Helper()
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := ps.Receive(rctx)
			cancel()
			if err != nil {
				t.Fatalf("no grant message: %v", err)
			}
			if m, ok := m.(*redis.Message); ok {
				return m.Channel
			}
		}
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch != queue+":"+a.sub {
		t.Fatalf("the first release told channel %q, want A's only", ch)
	}
	la := acquiredWithin(t, gotA, 2*time.Second, "A after the release")
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch != queue+":"+b.sub {
		t.Fatalf("A's release told channel %q, want B's only", ch)
	}
	acquiredWithin(t, gotB, 2*time.Second, "B after A's release").Unlock(ctx)
}

// Fences of fenced acquisitions keep rising across unfenced ones, which
// neither take nor move the counter.
func TestFenceAcrossUnfenced(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	l := newLocker(t, shared)
	var last uint64
	for i := range 6 {
		fenced := i%2 == 0
		lk, err := l.TryLock(ctx, key, dlock.WithFencing(fenced))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !fenced && lk.Fence() != 0:
			t.Errorf("acquisition %d: unfenced, fence %d", i, lk.Fence())
		case fenced && lk.Fence() <= last:
			t.Errorf("acquisition %d: fence %d after %d", i, lk.Fence(), last)
		case fenced:
			last = lk.Fence()
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A fair newcomer does not take a free lock while a live waiter queues:
// it hands the lock to the head of the queue instead.
func TestFairNoBarging(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	l := newLocker(t, shared)
	k, err := redisnode.Of(dlock.DefaultPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	// a waiter at the head of the queue, alive for 10s (its Locker listens
	// on its channel), while the lock is free
	raw := shared.Client(t)
	listen := raw.SSubscribe(ctx, l.channel(&hold{keys: k}))
	defer listen.Close()
	if _, err := listen.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, "dlock:lock:"+key, "holder", time.Minute)
	head := l.newLock(driver.HoldLock, key, k, "queued-waiter", "", false, 10*time.Second)
	if held, _, err := l.attempt(ctx, head, modeFair|modeWait, 10*time.Second, 1, nil); err != nil || held {
		t.Fatalf("the head's attempt: held %v, %v", held, err)
	}
	raw.Del(ctx, "dlock:lock:"+key) // the holder's lease ran out
	if _, err := newLocker(t, shared).TryLock(ctx, key, dlock.WithFair(true)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a fair newcomer over a live queue: %v, want ErrNotAcquired", err)
	}
	if got := raw.Get(ctx, "dlock:lock:"+key).Val(); got != "queued-waiter" {
		t.Fatalf("lock value %q, want it granted to the queue's head", got)
	}
	raw.Del(ctx, "dlock:lock:"+key)
}

// A fair-mode waiter that crashed does not block those behind it.
func TestFairCrashedWaiter(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	holder := newLocker(t, shared)
	lk, err := holder.TryLock(ctx, key, dlock.WithFair(true))
	if err != nil {
		t.Fatal(err)
	}
	// The crashed waiter: it queued (claim window 300ms) and never came back.
	dead := holder.newLock(driver.HoldLock, key, lk.(*hold).keys, "crashed-waiter", "", false, 10*time.Second)
	if _, _, err := holder.attempt(ctx, dead, modeFair|modeWait, 300*time.Millisecond, 1, nil); err != nil {
		t.Fatal(err)
	}
	waiter := newLocker(t, shared)
	got := waitFor(ctx, waiter, key, dlock.WithFair(true), dlock.WithRetry(dlock.FixedInterval(200*time.Millisecond)))
	queued(t, shared, key, 2)
	lk.Unlock(ctx) // granted to the crashed waiter, which never confirms
	next := acquiredWithin(t, got, 5*time.Second, "the waiter behind a crashed one")
	next.Unlock(ctx)
}

// Many contenders on one hot key: every acquisition is exclusive, and every
// contender gets its turns.
func TestHotKeyNoStarvation(t *testing.T) {
	ctx := context.Background()
	key := keyFor(t)
	const contenders, rounds = 8, 10
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		inside int
	)
	for range contenders {
		l := newLocker(t, shared)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				lk, err := l.Lock(ctx, key, dlock.WithWait(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Error("two holders at once")
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // the work done under the lock
				mu.Lock()
				inside--
				mu.Unlock()
				if err := lk.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := shared.Client(t).Exists(ctx, "{dlock:lock:"+key+"}:q", "{dlock:lock:"+key+"}:w").Val(); n != 0 {
		t.Fatalf("%d queue keys left behind", n)
	}
}

// A waiter that took its grant without a round trip holds the lock for its
// full TTL: its watchdog extends the short grant before the grant ends.
func TestGrantExtended(t *testing.T) {
	ctx := context.Background()
	holder, waiter := newLocker(t, shared), newLocker(t, shared)
	key := keyFor(t)
	// claim window 2*100ms+250ms: the grant alone would lapse in 450ms
	lk, got := heldWithWaiter(t, holder, waiter, key, 100*time.Millisecond)
	lk.Unlock(ctx)
	next := acquiredWithin(t, got, 2*time.Second, "the waiter")
	time.Sleep(time.Second) // twice the claim window: the load under test
	raw := shared.Client(t)
	if next.Err() != nil || raw.Get(ctx, "dlock:lock:"+key).Val() != next.Token() {
		t.Fatalf("the granted lock did not outlive its claim window: %v", next.Err())
	}
	if pttl := raw.PTTL(ctx, "dlock:lock:"+key).Val(); pttl < 5*time.Second {
		t.Fatalf("the granted lock's lease is %v, want about the 10s TTL", pttl)
	}
	next.Unlock(ctx)
}

// A waiting Lock rides out commands whose replies are lost (a connection
// reset, a failover in progress) and tries again within its wait; each
// lost attempt gives back what it may have taken. A single attempt
// (TryLock, WithWait(0)) reports the failure.
func TestWaitRidesOutLostReplies(t *testing.T) {
	ctx := context.Background()
	c := shared.Client(t)
	hook := &counter{}
	c.AddHook(hook)
	l, err := New(c, dlock.WithRetry(dlock.FixedInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset (injected)")}
	var lost atomic.Int32
	loseTwo := func(cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "set" || name == "evalsha" || name == "eval") && lost.Add(1) <= 2 {
			return reset
		}
		return nil
	}
	hook.fail.Store(&loseTwo)
	defer hook.fail.Store(nil)

	if _, err := l.TryLock(ctx, keyFor(t)); !errors.Is(err, reset) {
		t.Fatalf("TryLock = %v, want the lost reply's error", err)
	}
	lost.Store(0)
	key := keyFor(t)
	lk, err := l.Lock(ctx, key, dlock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Lock = %v, want the lock after two lost replies", err)
	}
	if got := lost.Load(); got < 3 {
		t.Fatalf("%d commands sent, want the two lost and one more", got)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
