package redlock

import (
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var _ driver.Declarer = (*Locker)(nil)

// Unsupported declares what the Redlock driver does not offer (see
// driver.Supports): a semaphore, for a majority of independent masters
// cannot bound the permits.
func (l *Locker) Unsupported(f driver.Feature) error {
	switch f {
	case driver.FeatureSemaphore:
		return &driver.UnsupportedError{Backend: "redlock", Feature: f, Reason: "a majority of independent masters cannot bound permits: two majorities of 3 nodes can hold 3 permits of 2"}
	case driver.FeatureLapse:
		if _, ok := any((*lock)(nil)).(dlock.Lapser); !ok {
			return &driver.UnsupportedError{Backend: "redlock", Feature: f, Reason: "its locks cannot lapse"}
		}
	}
	return nil
}
