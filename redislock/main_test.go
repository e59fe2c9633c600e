package redislock

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// shared is the server of the tests that need no fault of their own, and of
// the Examples; TestMain starts it.
var shared *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(permitWorker()) // a process that TestSemaphoreKilled starts
	}
	os.Exit(redistest.Main(m, func(s *redistest.Server) { shared = s }))
}

// newLocker returns a Locker on its own client of s, closed when t ends.
func newLocker(t testing.TB, s *redistest.Server, opts ...dlock.Option) *Locker {
	t.Helper()
	return lockerOf(t, s.Client(t), opts...)
}

// lockerOf returns a Locker on client, closed when t ends.
func lockerOf(t testing.TB, client redis.UniversalClient, opts ...dlock.Option) *Locker {
	t.Helper()
	l, err := New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// keyFor returns a key unique to the test and to this run of it, so that
// -count=N runs do not meet the keys of earlier runs on the shared server.
func keyFor(t testing.TB) string {
	return strings.ReplaceAll(t.Name(), "/", ":") + ":" + driver.NewToken()[:8]
}

// within fails t unless ch is closed or receives within d.
func within[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing after %v", what, d)
		var zero T
		return zero
	}
}

// noLeak checks that the goroutines started during a test end with it.
func noLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond) // poll, bounded by the deadline
		}
	})
}

// counter is a go-redis hook that counts round trips (one per command or
// pipeline) and the commands sent, by name.
type counter struct {
	trips atomic.Int64
	// fail, when set, is called before each command; a non-nil result is
	// returned instead of the command's reply, after the command was sent.
	fail atomic.Pointer[func(redis.Cmder) error]
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		err := next(ctx, cmd)
		if f := c.fail.Load(); f != nil {
			if ferr := (*f)(cmd); ferr != nil {
				cmd.SetErr(ferr)
				return ferr
			}
		}
		return err
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}
