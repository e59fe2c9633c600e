package driver

import "time"

// Drift is the margin a driver takes off every lease for the server's
// clock running faster than the client's: ttl/Divisor + Floor.
type Drift struct {
	Divisor int           // the share of the lease: 100 takes 1%
	Floor   time.Duration // added to every margin
}

// Of returns the margin taken off a lease of ttl.
func (d Drift) Of(ttl time.Duration) time.Duration {
	return ttl/time.Duration(d.Divisor) + d.Floor
}

// Deadline returns the local end of a lease of ttl set by a request sent
// at sent, read on the monotonic clock before the request left: a reply
// that comes late cannot lengthen the lease. Until then the server keeps
// the lock, unless its clock runs faster than the margin allows.
func (d Drift) Deadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - d.Of(ttl))
}
