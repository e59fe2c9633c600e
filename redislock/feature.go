package redislock

import "github.com/dlock-go/dlock/driver"

var _ driver.Declarer = (*Locker)(nil)

// Unsupported returns nil: on one server, through Sentinel, on a Cluster
// and with replica acknowledgement, the Redis driver offers every feature
// (see driver.Supports).
func (l *Locker) Unsupported(driver.Feature) error { return nil }
