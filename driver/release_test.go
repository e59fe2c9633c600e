package driver_test

import (
	"context"
	"errors"
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
	var deadlines []time.Time
	began := time.Now()
	err := driver.ReleaseAll([]int{0, 1, 2}, func(ctx context.Context, i int) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Fatalf("release %d: no deadline", i)
		}
		deadlines = append(deadlines, d)
		return errs[i]
	})
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
	if d := deadlines[0].Sub(began); d < driver.ReleaseTimeout || d > driver.ReleaseTimeout+time.Second {
		t.Errorf("deadline %v after the start; want ReleaseTimeout (%v)", d, driver.ReleaseTimeout)
	}
	if err := driver.ReleaseAll(nil, func(context.Context, int) error { return failed }); err != nil {
		t.Errorf("ReleaseAll of nothing = %v", err)
	}
}
