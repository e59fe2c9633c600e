package etcdlock

import (
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// LeaseDeadline is the local deadline of the lease that holds lk.
func LeaseDeadline(lk interface{ Key() string }) time.Time {
	return lk.(*hold).currentLease().localDeadline()
}

// RangeOf is the etcd key range of key's holds.
func (l *Locker) RangeOf(key string) string { return l.rangeOf(key) }

// BaseOf is the etcd prefix of the holds of key's lock of kind k.
func (l *Locker) BaseOf(k dlock.Kind, key string) string {
	kd, _ := driver.HoldKindOf(k)
	return l.baseOf(kd, key)
}

// SetWatchAfter sets how long the holds of l live before they watch their
// key (a second by default).
func SetWatchAfter(l *Locker, d time.Duration) { l.watchAfter = d }

// DeletesPending is the number of deletes of keys that l's acquisitions
// would otherwise reuse, under way or pending (see names.go).
func DeletesPending(l *Locker) int64 { return l.deleting.pending.Load() }
