// Package settings holds the resolved options of a Locker and of one call.
// Package dlock builds them (its Option values write to an Options) and
// package driver hands them to drivers; it is internal so that neither the
// user's nor the driver author's documentation shows the plumbing between
// the two.
package settings

import (
	"context"
	"log/slog"
	"time"
)

// An Option writes one setting. dlock's With functions make them.
type Option func(*Options)

// Options is the resolved set of options that a driver reads.
type Options struct {
	// TTL is the lease of an acquisition.
	TTL time.Duration
	// AutoRenew keeps a held lock alive in the background until it is
	// released.
	AutoRenew bool
	// Wait bounds how long Lock waits; Waiting says whether it was set.
	// When it was not, Lock waits until its context ends.
	Wait    time.Duration
	Waiting bool
	// Retry paces the attempts of a waiting Lock.
	Retry Retry
	// Owner makes acquisitions reentrant for one owner identity, overriding
	// the owner in the context (see OwnerIn).
	Owner string
	// Fair serves waiters in arrival order.
	Fair bool
	// Fencing asks for a fencing token with every acquisition. Drivers
	// that pay for a fence hand one out only when asked; drivers that get
	// one for free always do.
	Fencing bool
	// Notify wakes waiters when the lock is released, where the driver
	// can; without it waiters poll at the Retry pace.
	Notify bool
	// Replicas, when positive, makes the Redis driver count an acquisition,
	// a renewal or a Refresh only once that many replicas acknowledged it,
	// waiting at most ReplicaTimeout.
	Replicas       int
	ReplicaTimeout time.Duration
	// Prefix starts every key the Locker writes. Locker only.
	Prefix string
	// Logger receives the Locker's structured logs. Locker only.
	Logger *slog.Logger
	// Observer, a observe.Observer, receives the Locker's events; nil for
	// none. Locker only. (Its type lives in dlock, which imports this
	// package.)
	Observer any

	invalid    error // the first option out of range
	lockerOnly error // the first option that applies to a Locker only
}

// Reject records that an option was out of range; Resolve and Apply
// return the first such error.
func (o *Options) Reject(err error) {
	if o.invalid == nil {
		o.invalid = err
	}
}

// LockerOnly records that an option applies to a Locker only; Apply, the
// resolution of one call, returns err.
func (o *Options) LockerOnly(err error) {
	if o.lockerOnly == nil {
		o.lockerOnly = err
	}
}

// Resolve applies opts over o, as a Locker's options.
func (o Options) Resolve(opts ...Option) (Options, error) {
	o = o.with(opts)
	o.lockerOnly = nil
	return o, o.invalid
}

// Apply applies opts over o, as one call's options: an option that
// applies to a Locker only is an error.
func (o Options) Apply(opts ...Option) (Options, error) {
	if len(opts) == 0 {
		return o, nil
	}
	o = o.with(opts)
	if o.invalid != nil {
		return Options{}, o.invalid
	}
	if o.lockerOnly != nil {
		return Options{}, o.lockerOnly
	}
	return o, nil
}

func (o Options) with(opts []Option) Options {
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// OwnerIn returns the owner of an acquisition: the one an option set,
// else the one ctx carries, else "".
func (o Options) OwnerIn(ctx context.Context) string {
	if o.Owner != "" {
		return o.Owner
	}
	id, _ := OwnerFrom(ctx)
	return id
}

type ownerKey struct{}

// ContextWithOwner returns a context that carries owner id ("" removes
// it).
func ContextWithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFrom returns the owner id that ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	id, _ := ctx.Value(ownerKey{}).(string)
	return id, id != ""
}

// ReleaseTimeout bounds a release made on a context detached from the
// caller's.
const ReleaseTimeout = 5 * time.Second
