package postgreslock

import (
	"context"
	"fmt"
	"sync/atomic"
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
// A call under a context that never ends (context.Background()) shares
// its bound with the calls that began within 50ms before it, so it may
// be cut up to 50ms sooner.
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
// turns the error of a statement it cut into a *noAnswerError (other
// errors pass through) and ends the bound. A ctx that never ends (no
// Done channel, as context.Background) gets a bound of bs (see bounds).
func bounded(ctx context.Context, bs *bounds) (context.Context, func(error) error) {
	if ctx.Done() == nil {
		r := bs.request(ctx)
		return r, r.cut
	}
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

// boundStep is how long one shared bound serves new requests (see
// bounds): a request is cut between RequestTimeout less boundStep and
// RequestTimeout after it began.
const boundStep = 50 * time.Millisecond

// bounds bound the requests whose caller's context never ends. Such a
// request needs a context only for its bound, and a context, a timer
// and a registration with it for every request are a good part of the
// client's cost of an uncontended cycle. So the requests that begin
// within one boundStep share one context, which ends RequestTimeout
// after the first of them began (cause errCut), or when parent does.
// Each statement's watch (pgx's, for the context's end) registers with
// that shared context, with no goroutine and no map of its own.
type bounds struct {
	parent context.Context
	cur    atomic.Pointer[bound]
}

// bound is one shared context, for the requests that begin before until.
type bound struct {
	ctx    context.Context
	cancel context.CancelFunc // its timer's end, by its deadline or parent's end
	until  time.Time
}

// request returns the context of a request on behalf of ctx, whose
// Done channel is nil: ctx's values, a shared bound's end.
func (bs *bounds) request(ctx context.Context) *request {
	now := time.Now()
	for {
		b := bs.cur.Load()
		if b != nil && now.Before(b.until) {
			return &request{Context: ctx, b: b.ctx}
		}
		bctx, cancel := context.WithDeadlineCause(bs.parent, now.Add(RequestTimeout), errCut)
		nb := &bound{ctx: bctx, cancel: cancel, until: now.Add(boundStep)}
		if bs.cur.CompareAndSwap(b, nb) {
			return &request{Context: ctx, b: bctx}
		}
		cancel()
	}
}

// request is the context of one bounded request whose caller's context
// never ends: that context's values, and the end of a shared bound.
type request struct {
	context.Context                 // the caller's, for its values
	b               context.Context // the shared bound
}

// Deadline, Done and Err are the bound's.
func (r *request) Deadline() (time.Time, bool) { return r.b.Deadline() }
func (r *request) Done() <-chan struct{}       { return r.b.Done() }
func (r *request) Err() error                  { return r.b.Err() }

// Value looks in the bound first, then in the caller's context. The
// bound holds no values but the context package's own, which make r's
// end the bound's to that package: a context derived from r (pgx's
// watch of a statement, through context.AfterFunc) registers with the
// bound directly, and context.Cause(r) is the bound's cause.
func (r *request) Value(key any) any {
	if v := r.b.Value(key); v != nil {
		return v
	}
	return r.Context.Value(key)
}

// AfterFunc runs f once the bound ends: context.AfterFunc calls it when
// it does not see r's end as the bound's (see Value), so that a watch
// still costs no goroutine.
func (r *request) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(r.b, f) }

// cut turns the error of a statement the bound cut into a
// *noAnswerError; other errors pass through.
func (r *request) cut(err error) error {
	if err != nil && context.Cause(r.b) == errCut {
		return &noAnswerError{err}
	}
	return err
}
