package driver

import (
	"context"

	"github.com/dlock-go/dlock"
)

// Ended returns the error of an acquisition of key whose context ended
// before it began, or nil while ctx is live. It is what a wait that the
// context ends returns: a *dlock.NotAcquiredError with the context's
// cause, so that a caller tells "not now" from "broken" alike however
// early the context ended. A driver calls it once the key and options
// passed their checks, before it sends anything.
func Ended(ctx context.Context, key string) error {
	if ctx.Err() == nil {
		return nil
	}
	return &dlock.NotAcquiredError{Key: key, Err: context.Cause(ctx)}
}
