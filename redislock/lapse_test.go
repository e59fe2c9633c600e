package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
)

// UnlockAfter on a hold of a semaphore or a read-write lock: the handle
// ends as released at once, the store keeps counting the hold until d has
// passed (another party is refused), and then the key is free. The hold's
// lease may be longer than d (the member's score is shortened; the set
// outlives it, and a purge drops the member) or shorter (the set and its
// holds hash must then live until d).
func TestUnlockAfterHolds(t *testing.T) {
	t.Parallel() // keys of its own; its cases wait out d
	type acquire func(ctx context.Context, l *Locker, key string, opts ...dlock.Option) (dlock.Lock, error)
	permit := func(ctx context.Context, l *Locker, key string, opts ...dlock.Option) (dlock.Lock, error) {
		return l.TryAcquire(ctx, key, 1, opts...)
	}
	read := func(ctx context.Context, l *Locker, key string, opts ...dlock.Option) (dlock.Lock, error) {
		return l.TryRLock(ctx, key, opts...)
	}
	write := func(ctx context.Context, l *Locker, key string, opts ...dlock.Option) (dlock.Lock, error) {
		return l.TryWLock(ctx, key, opts...)
	}
	const d = 3 * time.Second
	for _, tc := range []struct {
		name         string
		hold, other  acquire
		lease        dlock.Option
		refusedAfter time.Duration // how long after UnlockAfter another party is refused once more
	}{
		{"permit", permit, permit, dlock.WithTTL(30 * time.Second), 0},
		{"read", read, write, dlock.WithTTL(30 * time.Second), 0},
		{"write", write, read, dlock.WithTTL(30 * time.Second), 0},
		// A lease shorter than d: still counted once the lease would have
		// ended, until d. The lease is pinned, so that no renewal is on
		// the wire when UnlockAfter sets it.
		{"permit-short-lease", permit, permit, dlock.WithLease(time.Second), 1500 * time.Millisecond},
		{"write-short-lease", write, write, dlock.WithLease(time.Second), 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b := newLocker(t, shared), newLocker(t, shared)
			k := keyFor(t)
			lk := mustHold(t)(tc.hold(ctx, a, k, tc.lease))
			lapser, ok := lk.(driver.Lapser)
			if !ok {
				t.Fatalf("%T is not a driver.Lapser", lk)
			}
			began := time.Now()
			if err := lapser.UnlockAfter(ctx, d); err != nil {
				t.Fatalf("UnlockAfter(%v): %v", d, err)
			}
			select {
			case <-lk.Done():
			default:
				t.Fatal("UnlockAfter returned nil, and the handle's Done is still open")
			}
			if err := lk.Err(); !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("Err after UnlockAfter: %v, want ErrNotHeld", err)
			}
			if err := lk.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("Unlock after UnlockAfter: %v, want ErrNotHeld", err)
			}
			// Still counted by the store: another party is refused.
			mustWait(t)(tc.other(ctx, b, k))
			if tc.refusedAfter > 0 {
				// Past the hold's own lease, d not yet.
				<-time.After(time.Until(began.Add(tc.refusedAfter)))
				mustWait(t)(tc.other(ctx, b, k))
			}
			if time.Since(began) >= d {
				t.Fatalf("the refusals took %v, past d = %v: the machine is too slow for this test's margins", time.Since(began), d)
			}
			// Free once d has passed, not before.
			var got dlock.Lock
			dlocktest.Eventually(t, d+5*time.Second, "the other party takes the key", func() bool {
				lk, err := tc.other(ctx, b, k)
				if err != nil && !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("acquire: %v", err)
				}
				got = lk
				return err == nil
			})
			if at := time.Since(began); at < d-50*time.Millisecond {
				t.Errorf("the key was free %v after UnlockAfter(%v)", at, d)
			}
			if err := got.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
		})
	}
}
