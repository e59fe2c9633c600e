package election

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// maxFallback bounds how long an observer goes without reading the lock,
// in case a notification was lost.
const maxFallback = 10 * time.Second

// expiryMargin is added to the lease an observer last saw before it reads
// again: a Redis lease runs out on the server's clock, a little after the
// client's reckoning.
const expiryMargin = 20 * time.Millisecond

// Observe reports the leader: first who leads now, then each change,
// vacancy included, until ctx ends or the Locker is closed, when the
// channel is closed. It needs a Locker that implements dlock.Inspector and
// driver.Watcher, else it returns an error matching errors.ErrUnsupported.
//
// The observer reads the lock when the store says it changed (see
// driver.Watcher), and otherwise when the lease it last saw would have run
// out, at most 10s after its last read (so a leader that stopped renewing
// is seen gone within its lease, and a lost notification costs at most
// that long). A value is sent only when it differs from the last one
// sent. The channel holds no backlog: a reader that falls behind gets the
// leader as it is when it reads, and may miss a term shorter than that.
// A read that fails is tried again, after a pause that doubles up to 10s;
// the observer says nothing meanwhile.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	in, ok := e.locker.(dlock.Inspector)
	if !ok {
		return nil, unsupported(e.locker, "dlock.Inspector")
	}
	w, ok := e.locker.(driver.Watcher)
	if !ok {
		return nil, unsupported(e.locker, "driver.Watcher")
	}
	ctx, cancel := context.WithCancel(ctx)
	changes, err := w.Watch(ctx, e.key)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		defer cancel()
		e.observe(ctx, in, changes, out)
	}()
	return out, nil
}

// observe is the goroutine of one Observe.
func (e *Election) observe(ctx context.Context, in dlock.Inspector, changes <-chan struct{}, out chan<- Leader) {
	var (
		last  Leader
		sent  bool
		pause time.Duration // after a failed read
	)
	// The first read waits for the watch to be in place, so that no change
	// falls between the two, or for a bounded while.
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				return // the Locker was closed
			}
		case <-t.C:
		}
		info, err := in.Inspect(ctx, e.key)
		next := maxFallback
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			pause = min(max(2*pause, 100*time.Millisecond), maxFallback)
			next = pause
		default:
			pause = 0
			if info.Held && info.TTL > 0 {
				next = min(next, info.TTL+info.TTL/50+expiryMargin)
			}
			if cur := leaderOf(info); !sent || cur != last {
				select {
				case out <- cur:
					last, sent = cur, true
				case <-ctx.Done():
					return
				}
			}
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}
