package redlock

import (
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// calls counts a Locker's calls in flight that send requests without a
// place among the waiting acquisitions (which the tables count): TryLock,
// a hold's one attempt, a handle's Unlock, Refresh, TTL, UnlockAfter and
// Downgrade, and the inspections. Close stops admitting them and waits
// for those in flight before it waits for the Locker's requests, so that
// every request is started before that wait (a sync.WaitGroup must not
// gain its first count while it is waited for): each call runs before
// Close returns, or fails with dlock.ErrClosed.
type calls struct {
	mu      sync.Mutex
	closing bool
	n       sync.WaitGroup
}

// enter admits a call, unless Close has begun to wait for the calls; it
// reports whether it admitted it. An admitted call must leave.
func (c *calls) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.n.Add(1)
	return true
}

func (c *calls) leave() { c.n.Done() }

// close admits no more calls and waits for those in flight.
func (c *calls) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.n.Wait()
}

// errClosed is the error of a call that Close came before.
func errClosed(op, key string) error {
	return driver.Wrap(op, key, dlock.ErrClosed)
}
