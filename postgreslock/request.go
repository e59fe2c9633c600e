package postgreslock

import (
	"context"
	"fmt"
	"time"
)

// RequestTimeout bounds how long TryLock, a release (Unlock, and the
// release of UnlockAfter(0)) and a Downgrade wait for the server, whatever
// the connection does: a server paused or gone silent makes them return
// within it (sooner when ctx ends) with an error that is a net.Error
// whose Timeout() is true. It covers the connection the call may have to
// open first (a round trip or two more than the statement, which a slow
// network makes long), so it is etcdlock's 5s rather than redislock's 2s.
// The statement's outcome is then unknown: an acquisition it may have
// made is given back in the background, a release it may not have made
// leaves the row to lapse at its lease. A Lock with a wait limit returns
// within the limit plus a second, and without one waits as long as ctx.
const RequestTimeout = 5 * time.Second

// noAnswerError is the error of a statement that got no answer within
// RequestTimeout.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("postgres did not answer within %v: %v", RequestTimeout, e.err)
}
func (e *noAnswerError) Unwrap() error   { return e.err }
func (e *noAnswerError) Timeout() bool   { return true }
func (e *noAnswerError) Temporary() bool { return true }

// bounded returns ctx bounded by RequestTimeout, and a function that
// cancels it and turns the error of a statement it cut into a
// *noAnswerError (other errors pass through).
func bounded(ctx context.Context) (context.Context, func(error) error) {
	rctx, cancel := context.WithTimeoutCause(ctx, RequestTimeout, errCut)
	return rctx, func(err error) error {
		cut := err != nil && ctx.Err() == nil && context.Cause(rctx) == errCut
		cancel()
		if cut {
			return &noAnswerError{err}
		}
		return err
	}
}

// errCut is the cause of a request bound's end.
var errCut = fmt.Errorf("postgreslock: no answer within %v", RequestTimeout)
