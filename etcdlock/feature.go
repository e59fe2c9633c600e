package etcdlock

import "github.com/dlock-go/dlock/driver"

var _ driver.Declarer = (*Locker)(nil)

// Unsupported returns nil: the etcd driver offers every feature (see
// driver.Supports).
func (l *Locker) Unsupported(driver.Feature) error { return nil }
