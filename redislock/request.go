package redislock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// RequestTimeout bounds how long an acquisition waits for the reply to
// one request: TryLock returns within it (sooner when ctx ends, but see
// ContextTimeoutEnabled in the package doc), and Lock
// within its wait limit (dlock.WithWait) plus RequestTimeout, whatever the
// server does: a closed port, a server that accepts connections and never
// answers, one that answers late. With WithReplicaAck the bound of a
// request is RequestTimeout plus the acknowledgement's timeout.
//
// The client's own timeouts and retries (go-redis: a 3s ReadTimeout, and 3
// retries) may be longer; they no longer set how long a caller waits. A
// request whose reply does not come in time is left to end on its own, on
// a goroutine of the Locker (Close waits for it), and whatever it may have
// taken is given back then; the caller gets an error that is a net.Error
// whose Timeout() is true, which a waiting Lock rides out, as it rides out
// a lost reply: it attempts again once the request and its give-back
// ended, if its wait has not.
const RequestTimeout = 2 * time.Second

// workerIdle is how long a worker waits for another request before it
// ends.
const workerIdle = 10 * time.Second

// noReplyError is the error of a request whose caller stopped waiting for
// it: after its bound, or when the caller's context ended (cause).
type noReplyError struct {
	after   time.Duration
	cause   error         // the caller's context's error, or nil
	settled chan struct{} // closed once the request and its give-back ended
}

func (e *noReplyError) Error() string {
	if e.cause != nil {
		return "redislock: stopped waiting for the reply: " + e.cause.Error()
	}
	return "redislock: no reply within " + e.after.String()
}

// Timeout reports whether the request ran out of time (see net.Error).
func (e *noReplyError) Timeout() bool { return e.cause == nil || e.cause == context.DeadlineExceeded }

// Temporary is true: the server may answer the next request (see
// net.Error).
func (e *noReplyError) Temporary() bool { return true }

// Unwrap returns the caller's context's error, if it ended the wait.
func (e *noReplyError) Unwrap() error { return e.cause }

// A sender runs a Locker's acquisition requests on goroutines of its own
// (workers), so that a caller waits for a reply no longer than the
// request's bound, however long the client takes: the client's timeouts
// are its own, and a client without ContextTimeoutEnabled reads a reply
// until its ReadTimeout whatever the context says. Workers are made when
// no idle one takes a request, and end after workerIdle without one, or
// once the sender closed and their request ended. A request and its
// worker cost no allocation once the Locker is warm.
//
// A worker costs its caller two goroutine hand-offs per request, which
// on a loaded machine double the client's CPU of an uncontended cycle.
// While the coalescer sends pipelines (the load makes commands queue), an
// attempt waits in its queue on its caller's goroutine instead, and a
// goroutine of the sender sends the queue when no other caller does (see
// queued). And when the client bounds a command by its context's deadline
// (ContextTimeoutEnabled: reads, writes, the wait for a connection and
// between retries) and nothing is on the wire, an attempt is sent alone on
// its caller's goroutine, with a context whose deadline is the request's
// bound: the client keeps the bound itself. Such a client reads a reply
// until that deadline, not until a cancel: a caller whose context is
// cancelled while its attempt is on the wire waits for the reply, at most
// until the bound, as it would calling the client itself.
//
// A request whose caller stops waiting is abandoned: an attempt's context
// is cancelled (the client stops retrying it), and once it ends its
// worker gives back what it may have taken (undo) and closes settled, so
// that the caller's next request of the same lock cannot overtake the
// give-back. close waits for the abandoned requests, whose callers have
// left; a request whose caller waits is the caller's to wait for (and
// close may run inside one, on its worker: a client's hook may call it).
type sender struct {
	jobs chan func()   // an idle worker receives here: a request to run, or a flush of queued attempts (see queued)
	quit chan struct{} // closed by close: workers end

	mu     sync.Mutex
	closed bool
	left   sync.WaitGroup // the abandoned requests that began before close

	free sync.Pool // of *request

	// direct, when not nil, is the Locker's coalescer in front of a
	// client that bounds commands by their context; alone sends through
	// it one command at a time (see redisnode.Alone).
	direct *redisnode.Coalescer
	alone  redisnode.Processor

	// co, when not nil, is the Locker's coalescer: while it sends
	// pipelines, an attempt through it waits in its queue on its
	// caller's goroutine (see queued).
	co *redisnode.Coalescer

	started atomic.Int32 // workers started, for the tests
}

// The states of a request.
const (
	pending   int32 = iota // its caller waits for it
	answered               // its worker is done with it, for its caller
	abandoned              // its caller left: its worker finishes it
)

// request is one command, or one script call, to send on a worker.
type request struct {
	ctx reqContext // the context it is sent with

	p       redisnode.Processor
	cmd     redis.Cmder       // sent alone, when script is nil
	script  *redisnode.Script // or called with keys and args
	keys    []any
	args    []any
	argBuf  [12]any    // args' array
	res     *redis.Cmd // the script's reply
	undo    []*hold    // given back if the request is abandoned; none for a give-back
	undoBuf [4]*hold
	cancel  func() // called when the request ended, if not nil
	job     func() // runs it on a worker: made once per pooled request
	left    bool   // counted in the sender's left

	// expire closes ctx.done at the deadline of a request sent by its
	// caller (nil until one is); a request whose expire fired is not
	// reused (spent).
	expire *time.Timer
	spent  bool

	state    atomic.Int32
	answered chan struct{} // receives when the worker is done with it
	settled  chan struct{} // made when abandoned
	timer    *time.Timer
}

// reqContext is the context an attempt is sent with: its caller's values
// and deadline, and a Done of its own, closed when the attempt is
// abandoned or its caller's context ended (a pooled request makes none
// per use). A give-back is sent with its caller's context.
type reqContext struct {
	parent   context.Context
	done     chan struct{}
	err      error     // set before done is closed
	deadline time.Time // of a request sent by its caller; else zero
}

func (c *reqContext) Deadline() (time.Time, bool) {
	d, ok := c.parent.Deadline()
	if !c.deadline.IsZero() && (!ok || c.deadline.Before(d)) {
		return c.deadline, true
	}
	return d, ok
}
func (c *reqContext) Done() <-chan struct{} { return c.done }
func (c *reqContext) Value(key any) any     { return c.parent.Value(key) }

func (c *reqContext) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// init readies s; co is the Locker's coalescer, or nil, and direct is
// co when its client bounds commands by their context, else nil.
func (s *sender) init(co, direct *redisnode.Coalescer) {
	s.jobs = make(chan func())
	s.quit = make(chan struct{})
	if direct != nil {
		s.direct, s.alone = direct, direct.Alone()
	}
	if co != nil {
		s.co = co
		co.Spawn(s.do)
	}
	s.free.New = func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		r := &request{answered: make(chan struct{}, 1), timer: t, ctx: reqContext{done: make(chan struct{})}}
		r.job = func() { s.run(r) }
		return r
	}
}

// get returns a request to send through p with ctx.
func (s *sender) get(ctx context.Context, p redisnode.Processor) *request {
	r := s.free.Get().(*request)
	r.ctx.parent, r.p = ctx, p
	return r
}

// put recycles an answered request.
func (s *sender) put(r *request) {
	if r.spent {
		return // its expire closed its done
	}
	r.ctx.deadline = time.Time{}
	r.ctx.parent, r.p, r.cmd, r.script, r.keys, r.res, r.cancel, r.settled, r.left = nil, nil, nil, nil, nil, nil, nil, nil, false
	clear(r.args) // r.argBuf
	clear(r.undo) // r.undoBuf, or an array of its own
	r.args, r.undo = nil, nil
	r.state.Store(pending)
	s.free.Put(r)
}

// send runs r on a worker and waits for it until deadline, or until r's
// caller's context ends. It returns nil when r was answered, else a
// *noReplyError: r is then abandoned, and no longer the caller's.
func (s *sender) send(r *request, deadline time.Time) error {
	if s.direct != nil && len(r.undo) > 0 && r.p == redisnode.Processor(s.direct) && r.ctx.parent.Err() == nil && s.direct.Idle() {
		s.sendAlone(r, deadline)
		return nil
	}
	if s.co != nil && len(r.undo) > 0 && r.p == redisnode.Processor(s.co) && s.co.Queues() {
		if ok, err := s.queued(r, deadline); ok {
			return err
		}
	}
	begin := time.Now()
	s.do(r.job)
	r.timer.Reset(time.Until(deadline))
	var cause error
	select {
	case <-r.answered:
		r.timer.Stop()
		return nil
	case <-r.timer.C:
	case <-r.ctx.parent.Done():
		r.timer.Stop()
		cause = r.ctx.parent.Err()
	}
	settled := make(chan struct{})
	r.settled = settled
	s.mu.Lock()
	if r.left = !s.closed; r.left {
		s.left.Add(1)
	}
	s.mu.Unlock()
	if !r.state.CompareAndSwap(pending, abandoned) {
		<-r.answered // answered meanwhile
		if r.left {
			s.left.Done()
		}
		return nil
	}
	err := &noReplyError{after: time.Since(begin).Round(time.Millisecond), cause: cause, settled: settled}
	if len(r.undo) > 0 {
		// An attempt: the client may stop trying it, its give-back
		// follows. (A give-back carries a context of its own, and is
		// best sent, late or not.)
		r.ctx.err = context.Canceled
		if cause != nil {
			r.ctx.err = cause
		}
		close(r.ctx.done)
	}
	return err
}

// sendAlone sends the attempt r on its caller's goroutine, alone, bounded
// by deadline through its context (see sender).
func (s *sender) sendAlone(r *request, deadline time.Time) {
	r.p, r.ctx.deadline = s.alone, deadline
	if r.expire == nil { // made once per pooled request, by the first that needs it
		r.expire = time.AfterFunc(time.Until(deadline), func() {
			r.ctx.err = context.DeadlineExceeded
			close(r.ctx.done)
		})
	} else {
		r.expire.Reset(time.Until(deadline))
	}
	s.run(r)
	<-r.answered
	r.spent = !r.expire.Stop() // its done is closed, or about to be
}

// queued sends the attempt r in the coalescer's next pipeline, when the
// load makes commands queue, and waits for it on its caller's goroutine
// until deadline, or until r's caller's context ends; it reports false
// when the attempt would go out alone (send gives it to a worker then). A
// worker would cost two goroutine hand-offs per attempt; in the queue the
// caller waits as it would for the worker, and a pipeline, which carries
// many, costs one hand-off at most (see redisnode.Coalescer.Spawn). When
// the caller stops waiting, the attempt is taken out of the queue, or, on
// the wire, abandoned as send abandons it: given back once its reply came.
func (s *sender) queued(r *request, deadline time.Time) (bool, error) {
	cmd := r.cmd
	if r.script != nil {
		cmd = redis.NewCmd(&r.ctx, r.script.Args(r.keys, r.args...)...)
	}
	q, ok := s.co.Queue(cmd)
	if !ok {
		return false, nil
	}
	begin := time.Now()
	r.timer.Reset(time.Until(deadline))
	var cause error
	select {
	case <-q.Done():
		r.timer.Stop()
		return s.answered(r, q, cmd)
	case <-r.timer.C:
	case <-r.ctx.parent.Done():
		r.timer.Stop()
		cause = r.ctx.parent.Err()
	}
	settled := make(chan struct{})
	s.mu.Lock()
	if r.left = !s.closed; r.left {
		s.left.Add(1)
	}
	s.mu.Unlock()
	switch q.Leave(func() { s.do(func() { s.settle(r, settled) }) }) {
	case redisnode.Replied:
		<-q.Done()
		if r.left {
			s.left.Done()
		}
		return s.answered(r, q, cmd)
	case redisnode.Unsent:
		r.undo = nil // nothing to give back
		s.settle(r, settled)
	}
	return true, &noReplyError{after: time.Since(begin).Round(time.Millisecond), cause: cause, settled: settled}
}

// answered finishes queued's attempt r, whose command cmd q answered: a
// script that the server does not have (after a restart, a failover or
// SCRIPT FLUSH) is sent again as a worker's request, which loads it.
func (s *sender) answered(r *request, q redisnode.Queued, cmd redis.Cmder) (bool, error) {
	q.Answered()
	if r.script == nil {
		return true, nil
	}
	if redisnode.IsNoScript(cmd.Err()) {
		return false, nil
	}
	r.res = cmd.(*redis.Cmd)
	return true, nil
}

// settle ends the abandoned request r: it gives back what r may have
// taken and closes settled.
func (s *sender) settle(r *request, settled chan struct{}) {
	for _, lk := range r.undo {
		lk.l.giveBackNow(context.WithoutCancel(r.ctx.parent), lk)
	}
	close(settled)
	if r.left {
		s.left.Done()
	}
}

// do runs job on an idle worker, or on a new one; after close, on the
// caller's goroutine.
func (s *sender) do(job func()) {
	select {
	case s.jobs <- job:
		return
	default:
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		job()
		return
	}
	s.started.Add(1)
	go s.work(job)
}

// work is a worker: it runs job, then the jobs it is handed, until it has
// been idle for workerIdle or the sender closes.
func (s *sender) work(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		idle.Reset(workerIdle)
		select {
		case job = <-s.jobs:
		case <-idle.C:
			return
		case <-s.quit:
			return
		}
	}
}

// run sends r, and hands it back to its caller, or finishes it when its
// caller left.
func (s *sender) run(r *request) {
	var ctx context.Context = &r.ctx
	if len(r.undo) == 0 {
		ctx = r.ctx.parent // a give-back: its own context bounds it
	}
	if r.script != nil {
		r.res = r.script.Run(ctx, r.p, r.keys, r.args...)
	} else {
		_ = r.p.Process(ctx, r.cmd)
	}
	if r.state.CompareAndSwap(pending, answered) {
		if r.cancel != nil {
			r.cancel()
		}
		r.answered <- struct{}{}
		return
	}
	// Abandoned: r is this goroutine's now, and never reused.
	if r.cancel != nil {
		r.cancel()
	}
	s.settle(r, r.settled)
}

// close stops the workers, and waits for the abandoned requests to end.
// A request sent afterwards runs on its caller's goroutine.
func (s *sender) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	s.left.Wait()
}

// process sends cmd, an attempt of lock undo (nil for none), through p
// and waits for its reply until deadline, or until ctx ends, and returns
// cmd's error. When it stops waiting first, it returns a *noReplyError,
// and undo is given back once the request ended; cmd is then no longer
// the caller's to read.
func (l *Locker) process(ctx context.Context, deadline time.Time, p redisnode.Processor, cmd redis.Cmder, undo *hold) error {
	r := l.reqs.get(ctx, p)
	r.cmd = cmd
	r.undoOne(undo)
	if err := l.reqs.send(r, deadline); err != nil {
		return err
	}
	l.reqs.put(r)
	return cmd.Err()
}

// run is process for a call of script s, with keys and args: its reply,
// or a reply whose error is a *noReplyError.
func (l *Locker) run(ctx context.Context, deadline time.Time, p redisnode.Processor, s *redisnode.Script, keys, args []any, undo *hold) *redis.Cmd {
	r := l.reqs.get(ctx, p)
	r.undoOne(undo)
	return l.runScript(r, deadline, s, keys, args)
}

// runAll is run for an attempt of several locks.
func (l *Locker) runAll(ctx context.Context, deadline time.Time, p redisnode.Processor, s *redisnode.Script, keys, args []any, undo []*hold) *redis.Cmd {
	r := l.reqs.get(ctx, p)
	r.undo = append(r.undoBuf[:0], undo...) // a copy: undo stays the caller's
	return l.runScript(r, deadline, s, keys, args)
}

func (l *Locker) runScript(r *request, deadline time.Time, s *redisnode.Script, keys, args []any) *redis.Cmd {
	r.script, r.keys = s, keys
	r.args = append(r.argBuf[:0], args...)
	if err := l.reqs.send(r, deadline); err != nil {
		cmd := redis.NewCmd(r.ctx.parent)
		cmd.SetErr(err)
		return cmd
	}
	cmd := r.res
	l.reqs.put(r)
	return cmd
}

// undoOne makes lk, when not nil, what r gives back if abandoned.
func (r *request) undoOne(lk *hold) {
	if lk != nil {
		r.undoBuf[0] = lk
		r.undo = r.undoBuf[:1]
	}
}
