package redislock

import "github.com/dlock-go/dlock"

// observe reports the outcome of one batch of renewals to the Locker's
// observer, if it has one: per lock, renewed, refused (the token is gone:
// the loss follows) or failed with the batch's or the lock's error. A
// refusal that a release in flight explains is no failure, and is not
// reported.
func (s *watchdog) observe(batch []*lock, codes []byte, errs []error, err error) {
	if !s.l.table.Observed() {
		return
	}
	for i, lk := range batch {
		cerr := err
		if cerr == nil && errs != nil {
			cerr = errs[i]
		}
		if cerr == nil && codes[i] != '1' {
			s.mu.Lock()
			releasing := lk.sched.releasing
			s.mu.Unlock()
			if releasing {
				continue
			}
			cerr = dlock.ErrOwnershipLost
		}
		s.l.table.Renewed(lk, cerr)
	}
}
