package redisnode

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Prepare checks a call for key of a Locker whose defaults are base:
// the Locker is not closed, the options apply and pass check (when not
// nil), the key is valid and ctx has not ended. It returns the call's
// options and the lock's keys.
func Prepare(ctx context.Context, closed bool, base dlock.Options, key string, opts []dlock.Option, check func(dlock.Options) error) (dlock.Options, Keys, error) {
	if closed {
		return dlock.Options{}, Keys{}, driver.Wrap("lock", key, dlock.ErrClosed)
	}
	o, err := base.Apply(opts...)
	if err == nil && check != nil {
		err = check(o)
	}
	if err != nil {
		return o, Keys{}, driver.Wrap("lock", key, err)
	}
	k, err := Of(o.Prefix, key)
	if err != nil {
		return o, k, err
	}
	return o, k, driver.Ended(ctx, key)
}
