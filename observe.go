package dlock

import (
	"fmt"

	"github.com/dlock-go/dlock/observe"
)

// WithObserver sends the Locker's events to o: every acquisition and how
// it ended, every release, renewal, loss and wake-up (see package
// observe). Without it the Locker keeps no record of its events and pays
// nothing for them. Locker only.
func WithObserver(o observe.Observer) Option {
	return func(s *Options) {
		s.LockerOnly("WithObserver")
		if o == nil {
			s.Reject(fmt.Errorf("%w: nil observer", ErrInvalidOption))
			return
		}
		s.Observer = o
	}
}
