package redlock

import "github.com/dlock-go/dlock/driver"

var _ driver.Declarer = (*Locker)(nil)

// Unsupported declares what the Redlock driver does not offer (see
// driver.Supports): a semaphore, for a majority of independent masters
// cannot bound the permits (see the package doc). It offers every other
// feature.
func (l *Locker) Unsupported(f driver.Feature) error {
	if f == driver.FeatureSemaphore {
		return &driver.UnsupportedError{Backend: "redlock", Feature: f, Reason: "a majority of independent masters cannot bound permits: with 3 nodes and a limit of 2, permits on nodes {1,2}, {2,3} and {1,3} each hold a majority, 3 permits of 2"}
	}
	return nil
}
