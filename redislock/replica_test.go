package redislock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
)

// With WithReplicaAck, what a holder counts on is on a replica: an
// acquisition, a renewal, a Refresh and a grant count only once the replica
// acknowledged them. The replica is stopped (SIGSTOP) to make every
// acknowledgement fall short.
func TestReplicaAck(t *testing.T) {
	t.Parallel() // its own servers; it waits on acknowledgements and leases
	m := redistest.Start(t)
	r := redistest.StartReplica(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, replica := m.Client(t), r.Client(t)
	ack := WithReplicaAck(1, 200*time.Millisecond)
	l := newLocker(t, m, ack, dlock.WithFencing(true))
	// acked waits longer for the acknowledgements that come: on a loaded
	// machine a replica took more than 200ms to acknowledge an acquisition.
	acked := newLocker(t, m, WithReplicaAck(1, time.Second), dlock.WithFencing(true))
	// pause stops the replica until the subtest ends.
	pause := func(t *testing.T) {
		t.Helper()
		if err := r.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := r.Resume(); err != nil {
				t.Error(err)
			}
		})
	}
	// gone checks that nothing of key stayed on the master.
	gone := func(t *testing.T, key string) {
		t.Helper()
		if n, err := raw.Exists(ctx, "dlock:lock:"+key).Result(); err != nil || n != 0 {
			t.Errorf("the lock key is on the master after a shortfall: %d, %v", n, err)
		}
	}
	wantShort := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("err = %v, want ErrNotReplicated", err)
		}
		if errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("a shortfall matches ErrNotAcquired, which says the lock is busy: %v", err)
		}
	}
	// A wait that ran out on shortfalls matches ErrNotAcquired, as every
	// wait that ran out does (see dlock.Locker), with the shortfall as
	// its cause, not as a busy lock's.
	wantShortWait := func(t *testing.T, err error) {
		t.Helper()
		var na *dlock.NotAcquiredError
		if !errors.Is(err, ErrNotReplicated) || !errors.As(err, &na) || na.Err == nil {
			t.Fatalf("err = %v, want a *dlock.NotAcquiredError caused by ErrNotReplicated", err)
		}
	}

	t.Run("acquired", func(t *testing.T) {
		key := keyFor(t)
		lk, err := acked.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// Acknowledged: the replica has it the moment TryLock returns.
		if v, err := replica.Get(ctx, "dlock:lock:"+key).Result(); err != nil || v != lk.Token() {
			t.Errorf("the replica has %q, %v; want the token", v, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("TryLock", func(t *testing.T) {
		pause(t)
		key := keyFor(t)
		_, err := l.TryLock(ctx, key)
		wantShort(t, err)
		gone(t, key)
		// A call can ask for it of a Locker that does not.
		plain := newLocker(t, m)
		_, err = plain.TryLock(ctx, key, ack)
		wantShort(t, err)
		gone(t, key)
	})
	t.Run("Lock", func(t *testing.T) {
		pause(t)
		key := keyFor(t)
		_, err := l.Lock(ctx, key, dlock.WithWait(500*time.Millisecond))
		wantShortWait(t, err)
		gone(t, key)
	})
	t.Run("renewal", func(t *testing.T) {
		key := keyFor(t)
		// A renewal is due every 500ms, and its WAIT ends within 200ms and
		// the server's timer resolution (100ms at its default hz).
		lk, err := l.TryLock(ctx, key, dlock.WithTTL(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		pause(t)
		// The master takes every renewal, but the replica acknowledges
		// none: the lease runs out where the replica has it.
		within(t, lk.Done(), 3*time.Second, "the unacknowledged lock's loss")
		if err := lk.Err(); !errors.Is(err, dlock.ErrLeaseExpired) || !errors.Is(err, ErrNotReplicated) {
			t.Errorf("lost with %v, want ErrLeaseExpired for ErrNotReplicated", err)
		}
	})
	t.Run("Refresh", func(t *testing.T) {
		key := keyFor(t)
		lk, err := l.TryLock(ctx, key, dlock.WithLease(600*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		pause(t)
		wantShort(t, lk.Refresh(ctx, time.Minute))
		// The lease stays the one the replica has.
		within(t, lk.Done(), 2*time.Second, "the lease's end after an unacknowledged Refresh")
		if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
			t.Errorf("ended with %v, want ErrLeaseExpired", lk.Err())
		}
	})
	t.Run("grant", func(t *testing.T) {
		key := keyFor(t)
		holder := newLocker(t, m)
		held, err := holder.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := l.Lock(ctx, key, dlock.WithWait(time.Second), dlock.WithRetry(dlock.FixedInterval(time.Hour)))
			got <- err
		}()
		dlocktest.Eventually(t, 5*time.Second, "the waiter queues", func() bool {
			info, err := l.Inspect(ctx, key)
			return err == nil && info.Waiters == 1
		})
		pause(t)
		if err := held.Unlock(ctx); err != nil { // grants the lock to the waiter
			t.Fatal(err)
		}
		wantShortWait(t, within(t, got, 5*time.Second, "the waiter's end"))
		gone(t, key)
	})
	// A permit and the read and write sides of a read-write lock are
	// acknowledged as a lock is: taken where the replica has them, given
	// back when it does not acknowledge them.
	holds := []struct {
		name string
		of   func(l *Locker) dlock.Locker
		ns   string
	}{
		{"permit", func(l *Locker) dlock.Locker { return dlock.Permits(l, 2) }, "sem"},
		{"read", func(l *Locker) dlock.Locker { return dlock.RLocker(l) }, "rw"},
		{"write", func(l *Locker) dlock.Locker { return dlock.WLocker(l) }, "rw"},
	}
	for _, h := range holds {
		t.Run(h.name, func(t *testing.T) {
			key := keyFor(t)
			set := "dlock:" + h.ns + ":" + key
			lk, err := h.of(acked).TryLock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := replica.ZCard(ctx, set).Result(); err != nil || n != 1 {
				t.Errorf("the replica has %d holds, %v; want the hold the moment TryLock returned", n, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			pause(t)
			_, err = h.of(l).TryLock(ctx, key)
			wantShort(t, err)
			if n, err := raw.ZCard(ctx, set).Result(); err != nil || n != 0 {
				t.Errorf("the master keeps %d holds after a shortfall, %v; want none", n, err)
			}
		})
	}
}

// WithReplicaAck refuses values it cannot keep, changing nothing.
func TestReplicaAckBadInput(t *testing.T) {
	for _, tc := range []struct {
		n       int
		timeout time.Duration
		ttl     time.Duration
	}{
		{0, time.Second, dlock.DefaultTTL},
		{-1, time.Second, dlock.DefaultTTL},
		{1, 0, dlock.DefaultTTL},
		{1, -time.Second, dlock.DefaultTTL},
		{1, 2 * time.Second, time.Minute}, // the client's read timeout is 2s
	} {
		if _, err := New(shared.Client(t), dlock.WithTTL(tc.ttl), WithReplicaAck(tc.n, tc.timeout)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("New with WithReplicaAck(%d, %v) = %v, want ErrInvalidOption", tc.n, tc.timeout, err)
		}
		l := newLocker(t, shared)
		key := keyFor(t)
		if _, err := l.TryLock(context.Background(), key, dlock.WithTTL(tc.ttl), WithReplicaAck(tc.n, tc.timeout)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("TryLock with WithReplicaAck(%d, %v) = %v, want ErrInvalidOption", tc.n, tc.timeout, err)
		}
		if n, err := shared.Client(t).Exists(context.Background(), "dlock:lock:"+key).Result(); err != nil || n != 0 {
			t.Errorf("a refused TryLock wrote its key: %d, %v", n, err)
		}
	}
}

// A renewal that reaches a master that was demoted to a replica is not
// counted: the lease runs out, and the handle says it was lost.
func TestRenewalOnDemotedMaster(t *testing.T) {
	t.Parallel() // its own servers; it waits on the lease
	m := redistest.Start(t)
	r := redistest.StartReplica(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newLocker(t, m, dlock.WithTTL(600*time.Millisecond))
	lk, err := l.TryLock(ctx, keyFor(t))
	if err != nil {
		t.Fatal(err)
	}
	// The replica takes over; the old master follows it.
	if err := r.Client(t).ReplicaOf(ctx, "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.Client(t).ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(r.Port())).Err(); err != nil {
		t.Fatal(err)
	}
	// Its renewals are refused (READONLY), or find the key gone or wait on
	// the replica's sync: never counted, the lease runs out.
	within(t, lk.Done(), 3*time.Second, "the loss of a lock renewed on a demoted master")
	if err := lk.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("ended with %v, want a loss", err)
	}
}
