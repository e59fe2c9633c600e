package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// ReleaseAll gives every release the same deadline, one ReleaseTimeout
// from the start, and joins the errors other than ErrNotHeld.
func TestReleaseAll(t *testing.T) {
	failed := errors.New("no reply")
	errs := []error{nil, dlock.ErrNotHeld, failed}
	var (
		mu        sync.Mutex
		deadlines []time.Time
	)
	began := time.Now()
	err := driver.ReleaseAll([]int{0, 1, 2}, func(ctx context.Context, i int) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Errorf("release %d: no deadline", i)
		}
		mu.Lock()
		deadlines = append(deadlines, d)
		mu.Unlock()
		return errs[i]
	})
	ended := time.Now()
	if !errors.Is(err, failed) || errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("ReleaseAll = %v; want the failed release's error alone", err)
	}
	if len(deadlines) != 3 {
		t.Fatalf("%d releases; want 3", len(deadlines))
	}
	for i, d := range deadlines {
		if !d.Equal(deadlines[0]) {
			t.Errorf("release %d's deadline differs from the first's by %v", i, d.Sub(deadlines[0]))
		}
	}
	if d := deadlines[0]; d.Before(began.Add(driver.ReleaseTimeout)) || d.After(ended.Add(driver.ReleaseTimeout)) {
		t.Errorf("deadline %v after the start, %v after the end; want ReleaseTimeout (%v) from a moment between", d.Sub(began), d.Sub(ended), driver.ReleaseTimeout)
	}
	if err := driver.ReleaseAll(nil, func(context.Context, int) error { return failed }); err != nil {
		t.Errorf("ReleaseAll of nothing = %v", err)
	}
}

// ReleaseAll has releases in flight together: a release that waits for
// another to begin is not left waiting until the deadline (10,000 locks
// released one after another took more than ReleaseTimeout).
func TestReleaseAllAtOnce(t *testing.T) {
	const n = 8
	var wg sync.WaitGroup
	wg.Add(n)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	began := time.Now()
	err := driver.ReleaseAll(make([]int, n), func(ctx context.Context, _ int) error {
		wg.Done()
		select {
		case <-all: // every release has begun
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		t.Fatalf("ReleaseAll = %v after %v; want every release in flight at once, none waiting out the deadline", err, time.Since(began).Round(time.Millisecond))
	}
}
