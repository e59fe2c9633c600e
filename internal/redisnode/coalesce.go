package redisnode

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Processor sends one command and waits for its reply: a go-redis client,
// or a Coalescer in front of one.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// MaxFlushes is how many sends a coalescer keeps on the wire at once while
// the load is light. Up to that many goroutines at a time, every command
// goes out on its own, as without a coalescer; beyond, commands wait and
// leave together, and while such a pipeline is on the wire every new
// command waits too: the batches grow with the load. Chosen by
// measurement on 2 cores against direct sends: with a limit of 2, 3 to 5
// goroutines ran about 12% slower (their commands waited behind too few
// flushes); with 4, 1 to 8 goroutines ran as fast as direct sends, and 64
// about 3 times faster.
const MaxFlushes = 4

// maxPipelines is how many pipelines a coalescer keeps on the wire at
// once. With one, the commands that the goroutines of a pipeline issue
// once it is answered leave together in the next, as deep as the load
// makes it. Measured on 2 cores: with four (MaxFlushes), 64 goroutines
// made a round trip per 7 lock+unlock cycles, and with one per 16; 16
// goroutines one per cycle, and with one per 2; the CPU per cycle, client
// and server, was as much or less.
const maxPipelines = 1

// A Coalescer sends the commands that a Locker's goroutines issue at the
// same time in pipelines, so that 64 goroutines locking 64 keys share a
// few round trips instead of making 128 (a Redis server and its client
// spend most of their time on the system calls of each round trip, not on
// the commands). It has no goroutine of its own: up to MaxFlushes callers
// at a time send their command themselves (a flush); a caller that finds
// them all busy, or a pipeline on the wire, joins the queue, and a flush
// that ends hands the queue to the goroutine of its first command that may
// send (a caller of Queue never does: when only such callers wait, a
// goroutine of the coalescer's owner takes it, see Spawn). That goroutine
// first lets the goroutines woken with it run, so that their next
// commands join the queue, then sends its own command and all the others
// in one pipeline and wakes them. Alone, a command goes out at once, straight through the client,
// with the caller's context.
//
// How many callers send alone follows what is in flight: once a pipeline
// carried more than MaxFlushes commands, as many goroutines as that are
// about to issue their next, and a command goes out alone only when
// nothing is on the wire (else it waits for the next pipeline), until a
// pipeline carries MaxFlushes or fewer. Between two pipelines no command
// goes out alone: the flush counts as a pipeline from the moment it is
// handed over.
//
// A pipeline is sent with a context of its own, cancelled by no caller: it
// ends within the client's read and write timeouts. A caller whose
// context ends while its command waits in the queue takes it out (it is
// never sent) and returns the context's error; one whose command is on the
// wire waits for the reply, as the client does by default.
type Coalescer struct {
	client *redis.Client

	mu       sync.Mutex
	flushing int        // sends on the wire
	piped    int        // of which pipelines, or flushes handed over: the load makes commands queue
	queue    []*pending // commands waiting for a flush, in arrival order
	spare    []*pending // an empty array for the next queue, or nil
	deep     bool       // the last pipeline carried more than MaxFlushes commands: one send at a time

	pending sync.Pool // of *pending
	batches sync.Pool // of *batch

	// spawn, set by Spawn, runs a flush on a goroutine of the
	// coalescer's owner: one whose commands only callers of Queue wait
	// for. Nil until then, and Queue queues nothing.
	spawn      func(func())
	flushQueue func() // sends the queue: spawned when only Queue's callers wait in it
}

// batch is a pipeline and the commands to put in it, kept for reuse.
type batch struct {
	pipe redis.Pipeliner
	cmds []redis.Cmder
}

// pending is a command waiting in a coalescer's queue.
type pending struct {
	cmd redis.Cmder
	// done gets true when this command's goroutine is to flush the queue,
	// false when the command was sent in another's pipeline and answered.
	done chan bool
	// sent is set, under the coalescer's lock, when the command left the
	// queue: in a pipeline, or to flush the queue.
	sent bool
	// bounded says that the command's caller came through Queue: it never
	// flushes, and may leave while its command is on the wire (state,
	// late).
	bounded bool
	state   atomic.Int32 // of a bounded command: waiting, answered or left
	late    func()       // what runs when the reply of a command whose caller left came
}

// The states of a bounded command once it left the queue.
const (
	waiting  int32 = iota // its caller waits for the reply
	answered              // the reply came; its caller is told on done
	left                  // its caller left: late runs once the reply came
)

// NewCoalescer returns a Coalescer in front of c.
func NewCoalescer(c *redis.Client) *Coalescer {
	co := &Coalescer{client: c}
	co.pending.New = func() any { return &pending{done: make(chan bool, 1)} }
	co.batches.New = func() any { return &batch{pipe: c.Pipeline()} }
	co.flushQueue = func() {
		runtime.Gosched()
		co.mu.Lock()
		queue := co.take()
		co.mu.Unlock()
		co.flush(context.Background(), nil, queue, true)
	}
	return co
}

// Spawn lets c queue commands whose callers wait with a bound of their own
// (see Queue): run runs a flush of such commands on a goroutine of the
// caller of Spawn, and returns at once. Call it before the first Queue.
func (c *Coalescer) Spawn(run func(func())) { c.spawn = run }

// Process sends cmd, alone or with others, and waits for its reply. The
// error is cmd's.
func (c *Coalescer) Process(ctx context.Context, cmd redis.Cmder) error {
	c.mu.Lock()
	if c.alone() { // and so nobody queues
		c.flushing++
		c.mu.Unlock()
		c.flush(ctx, cmd, nil, false)
		return cmd.Err()
	}
	p := c.pending.Get().(*pending)
	p.cmd, p.sent = cmd, false
	c.queue = append(c.queue, p)
	c.mu.Unlock()

	var lead bool
	select {
	case lead = <-p.done:
	case <-ctx.Done():
		c.mu.Lock()
		if !p.sent {
			c.queue = slices.DeleteFunc(c.queue, func(q *pending) bool { return q == p })
			c.mu.Unlock()
			c.release(p)
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		c.mu.Unlock()
		lead = <-p.done // on the wire: the reply comes within the client's timeouts
	}
	c.release(p)
	if lead {
		runtime.Gosched() // let the goroutines woken with this one queue their next commands first
		c.mu.Lock()
		queue := c.take()
		c.mu.Unlock()
		own := cmd
		if err := ctx.Err(); err != nil {
			cmd.SetErr(err)
			own = nil // not sent; the others are
		}
		c.flush(ctx, own, queue, true)
	}
	return cmd.Err()
}

// Queued is a command that Queue put in a coalescer's queue. Its caller
// receives from Done and calls Answered, or stops waiting with Leave.
type Queued struct {
	c *Coalescer
	p *pending
}

// Queue puts cmd in c's queue, to leave in the next pipeline, for a caller
// whose wait has a bound of its own: its goroutine never sends the queue
// (a goroutine of c's owner does, see Spawn, or another caller of
// Process), so it can stop waiting at its bound even while the command is
// on the wire. It reports false, and leaves cmd alone, when the command
// would go out alone at once (see Process): its caller sends it some other
// way.
func (c *Coalescer) Queue(cmd redis.Cmder) (Queued, bool) {
	c.mu.Lock()
	if !c.queues() {
		c.mu.Unlock()
		return Queued{}, false
	}
	p := c.pending.Get().(*pending)
	p.cmd, p.sent, p.bounded = cmd, false, true
	p.state.Store(waiting)
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	return Queued{c, p}, true
}

// Queues reports whether Queue would queue a command now, for a caller
// that builds it only then.
func (c *Coalescer) Queues() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queues()
}

// queues is Queues, with c.mu held.
func (c *Coalescer) queues() bool { return c.spawn != nil && !c.alone() }

// alone reports, with c.mu held, whether a command would go out alone now
// (see Coalescer): else it waits in the queue.
func (c *Coalescer) alone() bool {
	return c.piped == 0 && (c.flushing == 0 || !c.deep && c.flushing < MaxFlushes)
}

// Done receives once the command was answered.
func (q Queued) Done() <-chan bool { return q.p.done }

// Answered ends the wait once Done received: q is spent.
func (q Queued) Answered() { q.c.release(q.p) }

// What Leave found.
const (
	Unsent  = iota // the command was taken out of the queue: it is never sent
	Late           // the command is on the wire: late runs once its reply came
	Replied        // the reply came meanwhile: receive from Done as if Leave was not called
)

// Leave stops the wait for q's reply. When the command is still in the
// queue, Leave takes it out (Unsent); when it is on the wire, late runs
// once its reply came, on the goroutine that sent it (Late); and when its
// reply came meanwhile, the caller receives from Done and calls Answered
// (Replied). q is spent, but for Replied.
func (q Queued) Leave(late func()) int {
	c, p := q.c, q.p
	c.mu.Lock()
	if !p.sent {
		c.queue = slices.DeleteFunc(c.queue, func(o *pending) bool { return o == p })
		c.mu.Unlock()
		c.release(p)
		return Unsent
	}
	c.mu.Unlock()
	p.late = late
	if p.state.CompareAndSwap(waiting, left) {
		return Late
	}
	return Replied
}

// Idle reports whether no send is on the wire.
func (c *Coalescer) Idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushing == 0
}

// Alone is a Processor that sends each command alone, with its caller's
// context: as a flush of c when one is free, else straight through c's
// client. A client with ContextTimeoutEnabled then bounds the command by
// the context's deadline, which a pipeline of c, nobody's in particular,
// does not carry.
type Alone struct{ c *Coalescer }

// Alone returns c's Alone.
func (c *Coalescer) Alone() Alone { return Alone{c} }

// Process sends cmd alone and waits for its reply. The error is cmd's.
func (a Alone) Process(ctx context.Context, cmd redis.Cmder) error {
	c := a.c
	c.mu.Lock()
	if c.flushing < MaxFlushes && c.piped == 0 && len(c.queue) == 0 {
		c.flushing++
		c.mu.Unlock()
		c.flush(ctx, cmd, nil, false)
		return cmd.Err()
	}
	c.mu.Unlock()
	return c.client.Process(ctx, cmd)
}

// take empties the queue into a batch to send. Called with c.mu held.
func (c *Coalescer) take() []*pending {
	queue := c.queue
	c.queue, c.spare = c.spare, nil
	for _, p := range queue {
		p.sent = true
	}
	return queue
}

// release puts p back for reuse, once nobody else holds it.
func (c *Coalescer) release(p *pending) {
	p.cmd, p.late, p.bounded = nil, nil, false
	c.pending.Put(p)
}

// flush sends own (when not nil) and the commands of queue, then hands the
// flush to the first command that queued meanwhile, or ends it. handed
// says that the flush was handed over by another: it counts in c.piped
// from the hand-over on, so that no command goes out alone between two
// pipelines.
func (c *Coalescer) flush(ctx context.Context, own redis.Cmder, queue []*pending, handed bool) {
	switch {
	case len(queue) == 0 && own != nil:
		_ = c.client.Process(ctx, own) // the error is own's
	case len(queue) > 0:
		// The pipeline is nobody's in particular: no caller's context
		// cancels it or carries its values.
		ctx := context.Background()
		b := c.batches.Get().(*batch)
		if own != nil {
			b.cmds = append(b.cmds, own)
		}
		for _, p := range queue {
			b.cmds = append(b.cmds, p.cmd)
		}
		_ = b.pipe.BatchProcess(ctx, b.cmds...)
		_, _ = b.pipe.Exec(ctx) // every command has its own error
		clear(b.cmds)
		b.cmds = b.cmds[:0]
		c.batches.Put(b)
		for _, p := range queue {
			if p.bounded && !p.state.CompareAndSwap(waiting, answered) {
				late := p.late // its caller left
				c.release(p)
				late()
				continue
			}
			p.done <- false
		}
	}
	c.mu.Lock()
	if queue != nil && c.spare == nil {
		clear(queue)
		c.spare = queue[:0]
	}
	others := c.piped
	if handed {
		others--
	}
	if len(queue) > 0 {
		c.deep = len(queue) >= MaxFlushes // and own, unless its caller left
	}
	if len(c.queue) == 0 || others >= maxPipelines {
		c.flushing--
		c.piped = others
		c.mu.Unlock()
		return
	}
	c.piped = others + 1 // the flush changes hands: flushing stays as it is
	i := slices.IndexFunc(c.queue, func(p *pending) bool { return !p.bounded })
	if i < 0 {
		// Only callers of Queue wait, and none of them sends.
		c.mu.Unlock()
		c.spawn(c.flushQueue)
		return
	}
	next := c.queue[i]
	c.queue = slices.Delete(c.queue, i, i+1)
	next.sent = true
	c.mu.Unlock()
	next.done <- true
}

// Busy returns how many sends are on the wire and how many commands wait
// for one.
func (c *Coalescer) Busy() (flushing, queued int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushing, len(c.queue)
}
