package rediswait

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// ObservedTTL is how long the observed key of a lock outlives the last
// watch that kept it alive; a watch sets it again every third of it.
const ObservedTTL = 30 * time.Second

// Mark sets a lock's observed key for ObservedTTL, on every target, so
// that the scripts that change the lock's holder publish on the key's
// channel. It returns, when not nil, what is enough of the targets that
// confirmed the subscription (see Watch); nil: all of them.
type Mark func(ctx context.Context, observed string) (enough func(confirmed []bool) bool)

// Observe starts a watch of the lock of key under prefix (see
// driver.Watcher): a goroutine that keeps the lock's observed key alive
// with mark, and sends on the channel it returns when a message comes on
// the key's channel, until ctx ends or the Locker closes; then it closes
// the channel. The watch is in place, and says so with a first value,
// once the subscription is, or wait has passed (zero: SubscribeTimeout).
// After Stop it returns an error matching dlock.ErrClosed.
func (s *Subscriber) Observe(ctx context.Context, prefix, key string, wait time.Duration, mark Mark) (<-chan struct{}, error) {
	k, err := redisnode.Of(prefix, key)
	if err != nil {
		return nil, err
	}
	if !s.Start() {
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer s.Done()
		defer close(out)
		s.observe(ctx, k.Observed, wait, mark, out)
	}()
	return out, nil
}

func (s *Subscriber) observe(ctx context.Context, observed string, wait time.Duration, mark Mark, out chan<- struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	enough := mark(ctx, observed) // before subscribing: a change from now on is published
	var by time.Time
	if wait > 0 {
		by = time.Now().Add(wait)
	}
	wake, unwatch := s.Watch(ctx, observed, driver.NewToken(), by, enough)
	defer unwatch()
	tell(out) // in place: whatever changed before, a read from now on sees it
	t := time.NewTicker(ObservedTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			tell(out)
		case <-t.C:
			mark(ctx, observed)
		}
	}
}

// tell sends on a channel of capacity one without blocking: a value not
// yet received stands for this one too.
func tell(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}
