package driver

import (
	"context"
	"errors"
	"sync"

	"github.com/dlock-go/dlock"
)

// releasers is how many releases ReleaseAll has in flight at once: enough
// for a driver that batches requests to fill its batches.
const releasers = 64

// ReleaseAll is the release of what a closing Locker held: it calls
// release on every hold, up to 64 at once, all within one ReleaseTimeout,
// so that a server that does not answer holds Close up for one timeout
// however many holds there are, and many holds are released as fast as
// the driver's batches go. A hold found released already (an error
// matching dlock.ErrNotHeld) is no error; the others are joined.
func ReleaseAll[H any](held []H, release func(context.Context, H) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan H)
	for range min(releasers, len(held)) {
		wg.Go(func() {
			for h := range next {
				if err := release(ctx, h); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, h := range held {
		next <- h
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
