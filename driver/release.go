package driver

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock"
)

// ReleaseAll is the release of what a closing Locker held: it calls
// release on each hold in turn, all within one ReleaseTimeout, so that a
// server that does not answer holds Close up for one timeout however many
// holds there are. A hold found released already (an error matching
// dlock.ErrNotHeld) is no error; the others are joined.
func ReleaseAll[H any](held []H, release func(context.Context, H) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	var errs []error
	for _, h := range held {
		if err := release(ctx, h); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
