package etcdlock

import "time"

// LeaseDeadline is the local deadline of the lease that holds lk.
func LeaseDeadline(lk interface{ Key() string }) time.Time {
	return lk.(*hold).currentLease().localDeadline()
}

// RangeOf is the etcd key range of key's holds.
func (l *Locker) RangeOf(key string) string { return l.rangeOf(key) }
