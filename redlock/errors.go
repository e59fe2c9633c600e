package redlock

import "errors"

// ErrNoQuorum reports that too few nodes answered a request for a
// majority to decide it: the nodes are down, paused or out of reach. It
// comes wrapped with the key, and joined with each node's error; it does
// not match dlock.ErrNotAcquired, which says that another party holds the
// lock.
var ErrNoQuorum = errors.New("redlock: no quorum")

func errorsJoin(errs []error) error {
	if len(errs) == 0 {
		return errors.New("no error reported")
	}
	return errors.Join(errs...)
}
