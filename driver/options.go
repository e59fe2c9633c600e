package driver

import (
	"log/slog"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/settings"
)

// Options is the resolved set of a Locker's or a call's options. Its
// exported fields are TTL, AutoRenew, Wait and Waiting (whether Wait was
// set), Retry (whose Start begins one wait's [Backoff]), Owner, Fair,
// Fencing, Notify, Replicas and ReplicaTimeout (Redis's replica
// acknowledgement), Prefix and Logger; OwnerIn(ctx) returns the owner of
// an acquisition (the one an option set, else the context's); Apply
// resolves one call's options over a Locker's.
type Options = settings.Options

// Backoff is the state of one wait under the retry strategy of an
// [Options]: Next returns the delay before the next attempt, or false when
// the strategy's limits say to stop.
type Backoff = settings.Backoff

// ReleaseTimeout bounds the cleanup a driver does on a context detached
// from its caller's: the release of an acquisition that arrived after the
// caller gave up, and the releases of Close.
const ReleaseTimeout = settings.ReleaseTimeout

// NewOptions resolves the options of a Locker over dlock's defaults. A
// driver calls it in its constructor; an option out of range is an error
// matching dlock.ErrInvalidOption or dlock.ErrInvalidTTL. The Logger is
// never nil: without dlock.WithLogger it discards.
func NewOptions(opts ...dlock.Option) (Options, error) {
	defaults := []dlock.Option{
		dlock.WithTTL(dlock.DefaultTTL),
		dlock.WithAutoRenew(true),
		dlock.WithNotify(true),
		dlock.WithRetry(dlock.FixedInterval(dlock.DefaultRetryInterval)),
		dlock.WithPrefix(dlock.DefaultPrefix),
	}
	o, err := Options{}.Resolve(append(defaults, opts...)...)
	if err != nil {
		return Options{}, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("component", "dlock")
	return o, nil
}
