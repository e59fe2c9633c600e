package driver

import (
	"log/slog"
	"time"

	"github.com/dlock-go/dlock"
)

// ReleaseTimeout bounds the cleanup a driver does on a context detached
// from its caller's: the release of an acquisition that arrived after the
// caller gave up, and the releases of Close.
const ReleaseTimeout = 5 * time.Second // as dlock.Guard's release

// NewOptions resolves the options of a Locker over dlock's defaults. A
// driver calls it in its constructor, and resolves each call's options
// over the result with [dlock.Options.Apply]; an option out of range is
// an error matching dlock.ErrInvalidOption or dlock.ErrInvalidTTL. The
// Logger is never nil: without dlock.WithLogger it discards.
func NewOptions(opts ...dlock.Option) (dlock.Options, error) {
	defaults := []dlock.Option{
		dlock.WithTTL(dlock.DefaultTTL),
		dlock.WithAutoRenew(true),
		dlock.WithNotify(true),
		dlock.WithRetry(dlock.FixedInterval(dlock.DefaultRetryInterval)),
		dlock.WithPrefix(dlock.DefaultPrefix),
	}
	o, err := dlock.Options{}.Resolve(append(defaults, opts...)...)
	if err != nil {
		return dlock.Options{}, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("component", "dlock")
	return o, nil
}
