package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// newLocker returns a Locker over client, closed when t ends.
func newLocker(t *testing.T, client redis.UniversalClient, opts ...dlock.Option) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// keyFor returns a key of this test's own, fresh for each run of it.
func keyFor(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", ":") + ":" + driver.NewToken()[:8]
}

// A host that dies in the middle of a job, its Locker cut from the server
// so that it can neither renew nor release, leaves the key taken for
// holdAtLeast from the job's start, not one TTL after its last renewal:
// another host whose clock fires the same tick 2s later does not run it,
// and a host after the hold does.
func TestRunOnceHoldsAfterDeathMidJob(t *testing.T) {
	ctx := context.Background()
	const ttl, hold = time.Second, 4 * time.Second
	proxy := redistest.StartProxy(t, server)
	dying := newLocker(t, proxy.Client(t), dlock.WithTTL(ttl))
	other := newLocker(t, server.Client(t), dlock.WithTTL(ttl))
	key := keyFor(t)

	start := time.Now()
	running := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- election.RunOnce(ctx, dying, key, hold, func(ctx context.Context) error {
			close(running)
			<-ctx.Done() // the job would run on; a dead host never returns
			return context.Cause(ctx)
		})
	}()
	select {
	case <-running:
	case err := <-first:
		t.Fatalf("the first host's RunOnce = %v before its job ran", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first host's job did not start")
	}
	proxy.Cut() // the first host is gone

	ran := 0
	job := func(context.Context) error { ran++; return nil }
	for _, at := range []time.Duration{2 * time.Second, hold - 500*time.Millisecond} {
		time.Sleep(time.Until(start.Add(at))) // another host's clock, later
		err := election.RunOnce(ctx, other, key, hold, job)
		if time.Since(start) >= hold {
			continue // too late to tell: this machine stalled past the hold
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || ran != 0 {
			t.Fatalf("RunOnce on another host %v after the job began, within the hold: %v, ran %d times; want ErrNotAcquired and no run",
				time.Since(start).Round(time.Millisecond), err, ran)
		}
	}

	time.Sleep(time.Until(start.Add(hold + 500*time.Millisecond)))
	if err := election.RunOnce(ctx, other, key, 0, job); err != nil || ran != 1 {
		t.Fatalf("RunOnce on another host after the hold: %v, ran %d times; want one run", err, ran)
	}
	select {
	case err := <-first:
		if !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("the cut host's RunOnce = %v, want its loss", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the cut host's job was never told of its loss")
	}
}

// plainLocks is a Locker whose locks cannot lapse: it hides UnlockAfter.
type plainLocks struct{ dlock.Locker }

type plainLock struct{ dlock.Lock }

func (p plainLocks) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	lk, err := p.Locker.TryLock(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return plainLock{lk}, nil
}

// bothKeys is a Locker whose lock of key is the lock of two keys.
type bothKeys struct{ dlock.Locker }

func (b bothKeys) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return dlock.TryLockAll(ctx, b.Locker, []string{key + ":1", key + ":2"}, opts...)
}

// A job whose lock is several keys that cannot lapse (a dlock.MultiLock is
// a Lapser only when its keys' locks are) is held until the hold ends, as
// a lock without UnlockAfter is, rather than failing after the job ran.
func TestRunOnceOfKeysThatCannotLapse(t *testing.T) {
	ctx := context.Background()
	l := bothKeys{plainLocks{newLocker(t, server.Client(t))}}
	k := keyFor(t)
	const hold = 300 * time.Millisecond
	start := time.Now()
	ran := 0
	if err := election.RunOnce(ctx, l, k, hold, func(context.Context) error { ran++; return nil }); err != nil || ran != 1 {
		t.Fatalf("RunOnce: %v, ran %d times", err, ran)
	}
	if took := time.Since(start); took < hold {
		t.Errorf("RunOnce returned %v after it began; want it to hold the keys for %v", took, hold)
	}
	other := newLocker(t, server.Client(t))
	lk, err := other.TryLock(ctx, k+":1")
	if err != nil {
		t.Fatalf("the key after the hold: %v", err)
	}
	lk.Unlock(ctx)
}
