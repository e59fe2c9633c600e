package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
)

// A host that dies in the middle of election.RunOnce's job, its client cut
// from etcd so that it can neither keep its lease alive nor release,
// leaves the key taken for holdAtLeast from the job's start, not one TTL
// after its last keep-alive: another host whose clock fires the same tick
// 2s later does not run it, and a host after the hold does.
func TestRunOnceHoldsAfterDeathMidJob(t *testing.T) {
	ctx := context.Background()
	const ttl, hold = time.Second, 4 * time.Second
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(shared.Endpoint(0), "http://"))
	dying := newLocker(t, shared.Client(t, proxy.Addr()), dlock.WithTTL(ttl))
	other := newLocker(t, client(t), dlock.WithTTL(ttl))
	key := fmt.Sprintf("runonce:dies:%d", time.Now().UnixNano())

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

	// etcd expires a lease up to its expiry check's period (500ms) late.
	deadline := start.Add(hold + 5*time.Second)
	for {
		err := election.RunOnce(ctx, other, key, 0, job)
		if err == nil && ran == 1 {
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("RunOnce on another host %v after the job began: %v, ran %d times; want one run once the hold passed",
				time.Since(start).Round(time.Millisecond), err, ran)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by deadline
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
