package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
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

func newStaller(key string) *staller {
	return &staller{key: key, stalled: make(chan struct{}), resume: make(chan struct{})}
}

func (s *staller) Observe(_ context.Context, e observe.Event) {
	if e.Kind == observe.Lost && e.Key == s.key {
		close(s.stalled)
		<-s.resume
	}
}

// releaseGate is a go-redis hook that tells of the first release sent and
// holds every release's reply until open closes.
type releaseGate struct {
	sent chan struct{}
	open chan struct{}
	once chan struct{}
}

func newReleaseGate() *releaseGate {
	g := &releaseGate{sent: make(chan struct{}), open: make(chan struct{}), once: make(chan struct{}, 1)}
	g.once <- struct{}{}
	return g
}

func (g *releaseGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *releaseGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if releaseScript.Runs(cmd) {
			select {
			case <-g.once:
				close(g.sent)
			default:
			}
			<-g.open
		}
		return err
	}
}

func (g *releaseGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An Unlock that begins after the lease's deadline finds the lock lost,
// even when the watchdog, late, has not ended the hold yet: the lease is
// over, and another party may hold the lock. Forced: an observer stalls
// the watchdog on another lock's loss while this one's deadline passes,
// another party takes the key, and the release's reply waits until the
// late watchdog has caught up.
func TestUnlockAfterDeadlineIsLost(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Second // a node timeout of half of it: room for a loaded machine
	first, second := keyFor(t)+":first", keyFor(t)+":second"
	st := newStaller(first)
	gate := newReleaseGate()
	cs := clients(t, shared)
	for _, c := range cs {
		c.AddHook(gate)
	}
	l, err := New(cs, WithNodeTimeout(testTimeout),
		dlock.WithTTL(ttl), dlock.WithAutoRenew(false), dlock.WithObserver(st))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-gate.open:
		default:
			close(gate.open)
		}
		select {
		case <-st.resume:
		default:
			close(st.resume)
		}
		l.Close()
	})
	// Lock, not TryLock: it rides out a node timeout under load.
	if _, err := l.Lock(ctx, first, dlock.WithWait(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(ctx, second, dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	<-st.stalled // the watchdog is stuck in the first lock's loss
	other := newLocker(t, shared, dlock.WithTTL(10*time.Second))
	if _, err := other.Lock(ctx, second, dlock.WithWait(10*time.Second)); err != nil {
		t.Fatalf("another party could not take the key after the lease: %v", err)
	}
	if lk.Err() != nil {
		t.Fatalf("the stalled watchdog ended the hold already (%v): the race is not forced", lk.Err())
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- lk.Unlock(ctx) }()
	select {
	case err = <-unlocked:
	case <-gate.sent:
		// The release is on the wire: let the watchdog catch up, then let
		// the reply in.
		close(st.resume)
		<-lk.Done()
		close(gate.open)
		err = <-unlocked
	}
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrLeaseExpired) {
		t.Fatalf("Unlock begun after the deadline = %v, want the loss (ErrLeaseExpired)", err)
	}
	if !errors.Is(lk.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want the loss", lk.Err())
	}
}
