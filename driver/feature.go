package driver

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// Feature is something beyond the plain lock that a Locker may offer. A
// driver that cannot offer one on its backend says so, with the reason a
// user would read, through [Declarer]; the call then fails at once with
// an error matching errors.ErrUnsupported, never with a silent success.
type Feature uint8

// The features a Locker may lack.
const (
	// FeatureSemaphore: the Locker is a dlock.Semaphore.
	FeatureSemaphore Feature = iota + 1
	// FeatureRWLock: the Locker is a dlock.RWLocker.
	FeatureRWLock
	// FeatureWatch: the Locker is a [Watcher], which election.Observe
	// and Leadership's wait for a vacancy use.
	FeatureWatch
	// FeatureLapse: the Locker's locks are [Lapser]s (dlock.UnlockAfter),
	// which election.RunOnce and the CLI's --hold-at-least use.
	FeatureLapse
	// FeatureInspect: the Locker is a dlock.Inspector.
	FeatureInspect
)

// Features lists every Feature, in the order of the tables that show them.
var Features = []Feature{FeatureSemaphore, FeatureRWLock, FeatureWatch, FeatureLapse, FeatureInspect}

var featureNames = [...]string{
	FeatureSemaphore: "semaphore",
	FeatureRWLock:    "read-write lock",
	FeatureWatch:     "watch",
	FeatureLapse:     "UnlockAfter",
	FeatureInspect:   "inspection",
}

// String names the feature as a user would.
func (f Feature) String() string {
	if int(f) < len(featureNames) && featureNames[f] != "" {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", uint8(f))
}

// UnsupportedError is the error of a call that a driver does not offer on
// its backend. It matches errors.ErrUnsupported.
type UnsupportedError struct {
	Backend string  // the driver, as in Event.Backend: "redis", "redlock", "etcd"
	Feature Feature // what is not offered
	Reason  string  // why, for a user
}

// Error says what is not offered, where, and why.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("dlock: %s does not offer the %s: %s", e.Backend, e.Feature, e.Reason)
}

// Unwrap returns errors.ErrUnsupported.
func (e *UnsupportedError) Unwrap() error { return errors.ErrUnsupported }

// Declarer is a Locker that declares features it lacks on its backend.
type Declarer interface {
	// Unsupported returns nil when the Locker offers f, else an
	// *UnsupportedError with the reason.
	Unsupported(f Feature) error
}

// Supports returns nil when l offers f, else an error matching
// errors.ErrUnsupported that says why: the reason l declares (see
// [Declarer]), or that l lacks the method f needs.
func Supports(l dlock.Locker, f Feature) error {
	if d, ok := l.(Declarer); ok {
		if err := d.Unsupported(f); err != nil {
			return err
		}
	}
	var ok bool
	switch f {
	case FeatureSemaphore:
		_, ok = l.(dlock.Semaphore)
	case FeatureRWLock:
		_, ok = l.(dlock.RWLocker)
	case FeatureWatch:
		_, ok = l.(Watcher)
	case FeatureInspect:
		_, ok = l.(dlock.Inspector)
	case FeatureLapse:
		_, ok = l.(Declarer) // a Lock's method: only a declaration can say
	default:
		return fmt.Errorf("%w: no such feature: %v", dlock.ErrInvalidOption, f)
	}
	if !ok {
		return &UnsupportedError{Backend: fmt.Sprintf("%T", l), Feature: f, Reason: "it does not implement it"}
	}
	return nil
}
