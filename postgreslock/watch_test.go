package postgreslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
)

// A Close that runs to its end while Watch is starting: Watch returns
// ErrClosed, or a channel that Close closed; no goroutine of the watch
// outlives Close.
func TestWatchRacesClose(t *testing.T) {
	l := newLocker(t, pool(t, ""))
	closed := make(chan error, 1)
	postgreslock.SetBeforeWatchStart(l, func() {
		go func() { closed <- l.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("Close did not return within 10s")
		}
	})
	c, err := l.Watch(context.Background(), t.Name())
	if err != nil {
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Watch during Close: %v, want ErrClosed", err)
		}
		return
	}
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		default:
			t.Fatal("Watch during Close returned a channel that is still open once Close returned")
		}
	}
}
