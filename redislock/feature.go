package redislock

import "github.com/dlock-go/dlock/driver"

var _ driver.Declarer = (*Locker)(nil)

// Unsupported declares what the Redis driver does not offer (see
// driver.Supports). On one server, through Sentinel and on a Cluster it
// offers every feature. With replica acknowledgement (WithReplicaAck),
// only locks are acknowledged: semaphores and read-write locks are not
// offered.
func (l *Locker) Unsupported(f driver.Feature) error {
	if l.opts.Replicas > 0 && (f == driver.FeatureSemaphore || f == driver.FeatureRWLock) {
		return errNoAckedHolds(f)
	}
	return nil
}

// errNoAckedHolds is the error of a semaphore or read-write lock asked
// for with replica acknowledgement.
func errNoAckedHolds(f driver.Feature) error {
	return &driver.UnsupportedError{Backend: "redis", Feature: f, Reason: "replica acknowledgement covers locks only; a permit's or a read-write hold's writes are not acknowledged"}
}
