package etcdlock

import "time"

// Glob runs List's pattern matcher on its own: it reports whether s
// matches pattern, or the error List returns for a malformed one.
func Glob(pattern, s string) (bool, error) {
	p := []rune(pattern)
	if err := checkGlob(p); err != nil {
		return false, err
	}
	return globMatch(p, []rune(s)), nil
}

// LeaseDeadline is the local deadline of the lease that holds lk.
func LeaseDeadline(lk interface{ Key() string }) time.Time {
	return lk.(*hold).currentLease().localDeadline()
}

// RangeOf is the etcd key range of key's holds.
func (l *Locker) RangeOf(key string) string { return l.rangeOf(key) }
