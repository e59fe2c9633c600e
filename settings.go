package dlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlock-go/dlock/observe"
)

// Options is the set of settings that [Option] values write: a Locker's
// defaults, resolved by its driver's constructor over dlock's, or one
// call's, resolved over its Locker's. A program sets it through the With
// functions; a driver reads it (package driver resolves it), and the
// options a driver defines for itself (redislock.WithReplicaAck) write its
// Driver field.
type Options struct {
	// TTL is the lease of an acquisition ([WithTTL], [WithLease]).
	TTL time.Duration
	// AutoRenew keeps a held lock alive in the background until it is
	// released ([WithAutoRenew]).
	AutoRenew bool
	// Wait bounds how long Lock waits, when Waiting says that it was set
	// ([WithWait]); otherwise Lock waits until its context ends.
	Wait    time.Duration
	Waiting bool
	// Retry paces the attempts of a waiting Lock ([WithRetry]).
	Retry RetryStrategy
	// Owner makes acquisitions reentrant for one owner identity, over the
	// owner the context carries ([WithOwner]; see [Options.OwnerIn]).
	Owner string
	// Fair serves waiters in arrival order ([WithFair]).
	Fair bool
	// Fencing asks for a fencing token with every acquisition
	// ([WithFencing]). Drivers that pay for a fence hand one out only when
	// asked; drivers that get one for free always do.
	Fencing bool
	// Notify wakes waiters when the lock is released, where the driver
	// can; without it waiters poll at the Retry pace ([WithNotify]).
	Notify bool
	// Prefix starts every key the Locker writes ([WithPrefix]). Locker
	// only.
	Prefix string
	// Logger receives the Locker's structured logs ([WithLogger]); nil for
	// none. Locker only.
	Logger *slog.Logger
	// Observer receives the Locker's events ([WithObserver]); nil for
	// none. Locker only.
	Observer observe.Observer
	// Driver holds the settings of the options that a driver defines for
	// itself, in a type of that driver's; nil when none was given. A
	// driver refuses the settings of another's (see package driver).
	Driver any

	invalid    error // the first option out of range
	lockerOnly error // the first option that applies to a Locker only
}

// Reject records that an option was out of range: the resolution of o
// ([Options.Resolve], [Options.Apply]) returns the first such error. An
// Option calls it.
func (o *Options) Reject(err error) {
	if o.invalid == nil {
		o.invalid = err
	}
}

// LockerOnly records that the option named name applies to a Locker
// only: [Options.Apply], the resolution of one call, refuses it with an
// error matching ErrInvalidOption. An Option calls it.
func (o *Options) LockerOnly(name string) {
	if o.lockerOnly == nil {
		o.lockerOnly = fmt.Errorf("%w: %s applies to a Locker, not to one call", ErrInvalidOption, name)
	}
}

// Resolve applies opts over o as a Locker's options, and returns the
// error of the first option out of range.
func (o Options) Resolve(opts ...Option) (Options, error) {
	o = o.with(opts)
	o.lockerOnly = nil
	return o, o.invalid
}

// Apply applies opts over o as one call's options: an option out of
// range, or one that applies to a Locker only, is an error, and the
// Options returned is then zero.
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

// OwnerIn returns the owner of an acquisition made with o and ctx: the one
// an option set, else the one ctx carries ([ContextWithOwner]), else "".
func (o Options) OwnerIn(ctx context.Context) string {
	if o.Owner != "" {
		return o.Owner
	}
	id, _ := OwnerFrom(ctx)
	return id
}
