package redlock

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// settings are what this driver's own options set.
type settings struct {
	nodeTimeout time.Duration // 0: DefaultNodeTimeout
}

// String names the option that set s.
func (s settings) String() string {
	return fmt.Sprintf("redlock.WithNodeTimeout(%v)", s.nodeTimeout)
}

// WithNodeTimeout bounds each request to one node (default
// DefaultNodeTimeout); a call's lease (its TTL) bounds it further to
// TTL/2. Give the clients ContextTimeoutEnabled, so that a client stops
// reading a node that does not answer when this timeout ends. A d of zero
// or less makes New return an error matching dlock.ErrInvalidOption.
// Locker only.
func WithNodeTimeout(d time.Duration) dlock.Option {
	return func(o *dlock.Options) {
		o.LockerOnly("redlock.WithNodeTimeout")
		if d <= 0 {
			o.Reject(fmt.Errorf("%w: redlock.WithNodeTimeout(%v): the timeout must be positive", dlock.ErrInvalidOption, d))
			return
		}
		driver.SetOwn(o, func(s *settings) { s.nodeTimeout = d })
	}
}
