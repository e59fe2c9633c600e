package redislock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/dlock-go/dlock/observe"
	"github.com/redis/go-redis/v9"
)

// staller is an observer that stops the goroutine which reports the loss
// of one key until resume closes: the watchdog's, which then ends no
// other lease meanwhile, as after a pause of the whole process.
type staller struct {
	key     string
	stalled chan struct{} // closed when the loss of key is being reported
	resume  chan struct{}
}

func (s *staller) Observe(_ context.Context, e observe.Event) {
	if e.Kind == observe.Lost && e.Key == s.key {
		close(s.stalled)
		<-s.resume
	}
}

// replyGate is a go-redis hook that tells of the first call of its script
// and holds that call's reply until open closes.
type replyGate struct {
	script *redisnode.Script
	once   sync.Once
	sent   chan struct{}
	open   chan struct{}
}

func (g *replyGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *replyGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if g.script.Runs(cmd) {
			g.once.Do(func() { close(g.sent) })
			<-g.open
		}
		return err
	}
}

func (g *replyGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A release begun after the lease's deadline finds the hold lost, even
// when the watchdog, late, has not ended it yet: the lease is over, and
// another party may hold the lock. Forced: an observer stalls the
// watchdog on another lock's loss while this one's deadline passes,
// another party takes the key, and the release's reply waits until the
// late watchdog has caught up.
func TestUnlockAfterDeadlineIsLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  *redisnode.Script
		take    func(ctx context.Context, l *Locker, key string) (dlock.Lock, error)
		release func(ctx context.Context, lk dlock.Lock) error
	}{
		{"lock", releaseScript,
			func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryLock(ctx, key) },
			func(ctx context.Context, lk dlock.Lock) error { return lk.Unlock(ctx) }},
		{"permit", holdReleaseScript,
			func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryAcquire(ctx, key, 1) },
			func(ctx context.Context, lk dlock.Lock) error { return lk.Unlock(ctx) }},
		{"lapse", lapseScript,
			func(ctx context.Context, l *Locker, key string) (dlock.Lock, error) { return l.TryLock(ctx, key) },
			func(ctx context.Context, lk dlock.Lock) error {
				return lk.(driver.Lapser).UnlockAfter(ctx, time.Second)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const ttl = 300 * time.Millisecond
			first, second := keyFor(t)+":first", keyFor(t)+":second"
			st := &staller{key: first, stalled: make(chan struct{}), resume: make(chan struct{})}
			gate := &replyGate{script: tc.script, sent: make(chan struct{}), open: make(chan struct{})}
			client := shared.Client(t)
			client.AddHook(gate)
			l := lockerOf(t, client, dlock.WithTTL(ttl), dlock.WithAutoRenew(false), dlock.WithObserver(st))
			var resumed, opened bool
			t.Cleanup(func() {
				if !opened {
					close(gate.open)
				}
				if !resumed {
					close(st.resume)
				}
			})
			if _, err := tc.take(ctx, l, first); err != nil {
				t.Fatal(err)
			}
			lk, err := tc.take(ctx, l, second)
			if err != nil {
				t.Fatal(err)
			}
			<-st.stalled // the watchdog is stuck in the first lock's loss
			other := newLocker(t, shared, dlock.WithTTL(10*time.Second))
			dlocktest.Eventually(t, 10*time.Second, "another party takes the key after the lease", func() bool { _, err := tc.take(ctx, other, second); return err == nil })
			if lk.Err() != nil {
				t.Fatalf("the stalled watchdog ended the hold already (%v): the race is not forced", lk.Err())
			}
			released := make(chan error, 1)
			go func() { released <- tc.release(ctx, lk) }()
			select {
			case err = <-released:
			case <-gate.sent:
				// The release is on the wire: let the watchdog catch up,
				// then let the reply in.
				resumed = true
				close(st.resume)
				<-lk.Done()
				opened = true
				close(gate.open)
				err = <-released
			}
			if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrLeaseExpired) {
				t.Fatalf("release begun after the deadline = %v, want the loss (ErrLeaseExpired)", err)
			}
			if !errors.Is(lk.Err(), dlock.ErrLockLost) {
				t.Fatalf("Err = %v, want the loss", lk.Err())
			}
		})
	}
}
