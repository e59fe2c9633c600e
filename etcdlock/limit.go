package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RequestTimeout bounds the requests to etcd that a call with no wait left
// makes: TryLock and the other single attempts (WithWait(0) too) end with
// an error when etcd has not answered within it, and a waiting call whose
// wait ran out spends at most this long cleaning up. The etcd client
// waits for a connection as long as its context lets it, so without a
// bound a call would hang while etcd is out of reach. A waiting call's
// own requests end with its wait (see [Locker.Lock]).
const RequestTimeout = 5 * time.Second

// The causes of a call's limit, added to the error of a request that the
// limit cut short.
var (
	errNoAnswer = fmt.Errorf("etcd did not answer within %v", RequestTimeout)
	errWaitOver = errors.New("etcd did not answer before the wait ran out")
)

// noAnswer returns err, the error of a request made with actx, saying
// that the call's limit cut it short when it did.
func noAnswer(actx context.Context, err error) error {
	if cause := context.Cause(actx); actx.Err() != nil && (cause == errNoAnswer || cause == errWaitOver) && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}
