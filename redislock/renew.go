package redislock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// schedule is a held lock's lease as the watchdog keeps it: its local
// deadline and the watchdog's plan for renewing it. It belongs to the
// watchdog, which guards it with its mutex; a lock carries its own so
// that scheduling one costs no allocation.
type schedule struct {
	ttl       time.Duration
	renew     bool
	deadline  time.Time // local lease deadline, on the monotonic clock
	due       time.Time // next time the watchdog looks at this lock
	index     int       // in the watchdog's heap; -1 when not there
	inflight  bool      // a renewal is on the wire
	renewNow  bool      // the lease is a waiter's short grant: renew it early
	renewArgs []any     // the renewal command, for renewTTL
	renewTTL  time.Duration
	lastErr   error  // why the last renewal failed
	gen       uint64 // the lease's generation: Refresh starts a new one
	releasing bool   // Unlock began: renewal stops, and the handle ends as released at its deadline
}

// The watchdog. One per Locker keeps every held lock in a heap ordered by
// the next moment it needs attention:
//
//   - a lock with renewal on is renewed ttl/3 after its lease began, by a
//     token-checked PEXPIRE; the locks that fall due within
//     ttl/10 of each other go to Redis in one batch of up to 1000: one call
//     of renew.lua on a single server (or Sentinel's master), one pipeline
//     of refresh.lua calls for a Cluster. So the cost is a few round trips
//     per period whatever the number of locks, and two goroutines in all;
//   - a lock whose renewal failed for want of the server is retried every
//     ttl/20 (at least 10ms, at most 1s) until its lease deadline;
//   - a lock whose lease deadline passes (renewal off, or the server out of
//     reach) is declared lost at that deadline, with dlock.ErrLeaseExpired,
//     before Redis could hand it to someone else. The deadline is kept by
//     the scheduler, never by the goroutine that waits on the network.
//
// A renewal the server refuses (the token is gone) loses the lock at once
// with dlock.ErrOwnershipLost.
type watchdog struct {
	l *Locker

	mu      sync.Mutex
	locks   lockHeap
	batch   []*lock // due for renewal, waiting for the renewer
	started bool
	stopped bool

	oneServer bool // the client talks to one server: a batch is one script call

	timer   *time.Timer   // wakes the scheduler at next
	next    time.Time     // when the scheduler looks at the heap next; zero: never
	kick    chan struct{} // batch has work
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
}

const (
	// maxPipeline bounds the renewals sent in one batch.
	maxPipeline = 1000
	// coalesce: a renewal due within ttl/coalesce of another's joins its
	// batch, a little early.
	coalesce = 10
)

func newWatchdog(l *Locker) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	_, oneServer := l.client.(*redis.Client) // a single server, or Sentinel's master
	return &watchdog{l: l, oneServer: oneServer, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// nextDue is when the scheduler must next look at lk: its renewal time, or
// its deadline.
func nextDue(lk *lock, leaseStart time.Time) time.Time {
	if lk.sched.renew {
		return leaseStart.Add(lk.sched.ttl / 3)
	}
	return lk.sched.deadline
}

// add starts watching a lock that was just acquired.
func (s *watchdog) add(lk *lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if !s.started {
		s.started = true
		s.timer = time.NewTimer(time.Hour)
		s.timer.Stop()
		s.running.Add(2)
		go s.schedule()
		go s.renewLoop()
	}
	if lk.sched.renewNow {
		// a waiter's grant: renew when a third of what is left of it has
		// passed, as any lease (a holder that releases sooner never does)
		now := time.Now()
		lk.sched.due = now.Add(lk.sched.deadline.Sub(now) / 3)
	} else {
		lk.sched.due = nextDue(lk, lk.sched.deadline.Add(-lk.sched.ttl+drift.Of(lk.sched.ttl)))
	}
	heap.Push(&s.locks, lk)
	s.arm(lk.sched.due)
}

// arm makes the scheduler look at the heap no later than t. It resets the
// timer rather than waking the goroutine, so that a lock acquired and
// released between two renewals costs the scheduler nothing. Called with
// s.mu held.
func (s *watchdog) arm(t time.Time) {
	if s.next.IsZero() || t.Before(s.next) {
		s.next = t
		s.timer.Reset(time.Until(t))
	}
}

// remove stops watching a lock.
func (s *watchdog) remove(lk *lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lk.sched.index >= 0 && lk.sched.index < len(s.locks) && s.locks[lk.sched.index] == lk {
		heap.Remove(&s.locks, lk.sched.index)
	}
}

// deadline returns lk's local lease deadline.
func (s *watchdog) deadline(lk *lock) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lk.sched.deadline
}

// refreshed records a lease of ttl that Refresh asked for at time sent,
// and starts a new generation of the lease: a renewal sent before can no
// longer lengthen it. When the outcome is unknown (applied is false),
// Redis may or may not have applied it, and the lease is the shorter of
// the old one and the new.
func (s *watchdog) refreshed(lk *lock, sent time.Time, ttl time.Duration, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lk.sched.gen++
	lk.sched.ttl = ttl
	old := lk.sched.deadline
	lk.setDeadline(sent, ttl)
	if !applied && old.Before(lk.sched.deadline) {
		lk.sched.deadline = old
	}
	if lk.sched.index < 0 {
		return
	}
	switch {
	case !lk.sched.inflight && !lk.sched.releasing:
		lk.sched.due = nextDue(lk, sent)
	case lk.sched.due.After(lk.sched.deadline):
		lk.sched.due = lk.sched.deadline
	default:
		return
	}
	heap.Fix(&s.locks, lk.sched.index)
	s.arm(lk.sched.due)
}

// releasing stops renewing lk, whose Unlock began: a release may delete
// the key at any moment, after which a renewal would find it gone. The
// scheduler still watches the deadline, where the handle ends as released
// if no release confirmed it before: the lease has lapsed by then.
func (s *watchdog) releasing(lk *lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lk.sched.releasing {
		return
	}
	lk.sched.releasing, lk.sched.renew = true, false
	if lk.sched.index >= 0 && !lk.sched.inflight {
		lk.sched.due = lk.sched.deadline
		heap.Fix(&s.locks, lk.sched.index)
		s.arm(lk.sched.due)
	}
}

func (s *watchdog) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.running.Wait()
}

// schedule is the scheduler's goroutine: it hands due locks to the renewer
// and declares lost the locks whose deadline passed.
func (s *watchdog) schedule() {
	defer s.running.Done()
	defer s.timer.Stop()
	for {
		now := time.Now()
		var expired []*lock
		s.mu.Lock()
	due:
		for len(s.locks) > 0 {
			lk := s.locks[0]
			switch {
			case !now.Before(lk.sched.deadline):
				heap.Pop(&s.locks)
				expired = append(expired, lk)
			case lk.sched.renew && !lk.sched.inflight && !lk.sched.due.After(now.Add(lk.sched.ttl/coalesce)):
				// due now or soon: renewals that fall due together share a
				// batch
				lk.sched.inflight = true
				lk.sched.due = lk.sched.deadline // still watched while on the wire
				heap.Fix(&s.locks, 0)
				s.batch = append(s.batch, lk)
			case !lk.sched.due.After(now):
				lk.sched.due = lk.sched.deadline // nothing to send: watch the deadline
				heap.Fix(&s.locks, 0)
			default:
				break due
			}
		}
		if len(s.batch) > 0 {
			signal(s.kick)
		}
		s.next = time.Time{}
		if len(s.locks) > 0 {
			s.arm(s.locks[0].sched.due)
		}
		s.mu.Unlock()
		for _, lk := range expired {
			s.expire(lk)
		}
		select {
		case <-s.timer.C:
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *watchdog) expire(lk *lock) {
	s.mu.Lock()
	cause, released := lk.sched.lastErr, lk.sched.releasing
	s.mu.Unlock()
	if released {
		lk.end(dlock.ErrNotHeld) // a release with unknown outcome: the lease lapsed
		return
	}
	if cause != nil {
		cause = fmt.Errorf("%w: renewal failed: %w", dlock.ErrLeaseExpired, cause)
	} else {
		cause = dlock.ErrLeaseExpired
	}
	lk.lose(cause)
}

// renewLoop is the renewer's goroutine: it sends the due renewals in
// batches.
func (s *watchdog) renewLoop() {
	defer s.running.Done()
	for {
		select {
		case <-s.kick:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		batch := s.batch
		s.batch = nil
		s.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), maxPipeline)
			s.renew(batch[:n])
			batch = batch[n:]
		}
	}
}

// renew sends one batch of renewals and files the results.
func (s *watchdog) renew(batch []*lock) {
	s.mu.Lock()
	deadline := batch[0].sched.deadline
	ttls := make([]time.Duration, len(batch))
	gens := make([]uint64, len(batch))
	args := make([][]any, len(batch))
	var ack replicaAck // the most that a lock of the batch asks
	for i, lk := range batch {
		ttls[i], gens[i] = lk.sched.ttl, lk.sched.gen
		args[i] = lk.renewal()
		if lk.sched.deadline.Before(deadline) {
			deadline = lk.sched.deadline
		}
		ack.n, ack.timeout = max(ack.n, lk.ack.n), max(ack.timeout, lk.ack.timeout)
	}
	s.mu.Unlock()
	// A renewal that lands after the earliest deadline is of no use to that
	// lock; the others retry soon.
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	sent := time.Now()
	var (
		codes []byte      // per lock: '1' renewed, '0' not ours
		errs  []error     // per lock, when the batch was a pipeline
		acks  []ackResult // per lock, when the batch asked replicas
		err   error
	)
	switch {
	case s.oneServer:
		codes, acks, err = s.script(ctx, args, ack)
	case ack.n > 0:
		codes, errs, acks = s.nodes(ctx, args, ack)
	default:
		codes, errs, err = s.pipeline(ctx, args)
		if isNoScript(err) {
			if err = refreshScript.load(ctx, s.l.client); err == nil {
				sent = time.Now()
				codes, errs, err = s.pipeline(ctx, args)
			}
		}
	}
	now := time.Now()
	var lost []*lock
	s.mu.Lock()
	for i, lk := range batch {
		lk.sched.inflight = false
		if lk.sched.index < 0 {
			continue // released or lost meanwhile
		}
		cerr := err
		if cerr == nil && errs != nil {
			cerr = errs[i]
		}
		if cerr == nil && codes[i] == '1' && lk.ack.n > 0 {
			// renewed, but the lease the holder counts on is the one the
			// replicas have
			cerr = acks[i].check(lk.ack)
		}
		switch {
		case cerr == nil && codes[i] == '1':
			lk.sched.lastErr = nil
			if lk.sched.gen == gens[i] {
				lk.setDeadline(sent, ttls[i])
			} else if d := drift.Deadline(sent, ttls[i]); d.Before(lk.sched.deadline) {
				// a Refresh came while this renewal was on the wire: Redis
				// applied the two in an unknown order, so the shorter
				// lease is the one to count on
				lk.sched.deadline = d
			}
			lk.sched.due = sent.Add(ttls[i] / 3)
			if lk.sched.releasing || lk.sched.deadline.Before(lk.sched.due) {
				lk.sched.due = lk.sched.deadline
			}
		case cerr == nil && lk.sched.releasing:
			// the release deleted the key after this renewal was sent
			lk.sched.due = lk.sched.deadline
		case cerr == nil:
			lost = append(lost, lk)
			continue
		default:
			lk.sched.lastErr = cerr
			lk.sched.due = now.Add(min(max(ttls[i]/20, 10*time.Millisecond), time.Second))
			if lk.sched.due.After(lk.sched.deadline) {
				lk.sched.due = lk.sched.deadline
			}
		}
		heap.Fix(&s.locks, lk.sched.index)
		s.arm(lk.sched.due)
	}
	s.mu.Unlock()
	s.observe(batch, codes, errs, err)
	if err != nil {
		s.l.log.WarnContext(s.ctx, "renewal failed", "key", batch[0].Key(), "locks", len(batch), "error", err)
	}
	for _, lk := range lost {
		lk.lose(dlock.ErrOwnershipLost)
	}
}

// script renews a batch of locks of one server in one call of renew.lua:
// one command, whatever the number of locks; with WAIT after it in the
// same round trip when the batch asks replicas (ack).
func (s *watchdog) script(ctx context.Context, args [][]any, ack replicaAck) ([]byte, []ackResult, error) {
	keys := make([]any, 0, 2*len(args))
	argv := make([]any, 0, 3*len(args))
	for _, a := range args { // a is refresh.lua's command: evalsha, sha, 2, keys..., argv...
		keys = append(keys, a[3:5]...)
		argv = append(argv, a[5:8]...)
	}
	var p processor = s.l.client
	var a *acker
	if ack.n > 0 {
		a = &acker{client: s.l.client, ack: ack}
		p = a
	}
	res, err := renewScript.run(ctx, p, keys, argv...).Text()
	if err == nil && len(res) != len(args) {
		err = fmt.Errorf("renew.lua answered %d results for %d locks", len(res), len(args))
	}
	var acks []ackResult
	if a != nil {
		acks = slices.Repeat([]ackResult{{a.replicas, a.err}}, len(args))
	}
	return []byte(res), acks, err
}

// nodes renews a batch of locks of a Cluster that asks replicas (ack):
// one pipeline per master of refresh.lua calls followed by WAIT, sent to
// the masters at once. A lock whose slot moved is answered MOVED, and
// renewed again soon, once the client read the new topology.
func (s *watchdog) nodes(ctx context.Context, args [][]any, ack replicaAck) ([]byte, []error, []ackResult) {
	codes := make([]byte, len(args))
	errs := make([]error, len(args))
	acks := make([]ackResult, len(args))
	cc := s.l.client.(*redis.ClusterClient)
	on := map[*redis.Client][]int{}
	for i, a := range args {
		node, err := cc.MasterForKey(ctx, firstKey(a))
		if err != nil {
			errs[i] = err
			continue
		}
		on[node] = append(on[node], i)
	}
	var wg sync.WaitGroup
	for node, batch := range on {
		wg.Go(func() {
			cmds := make([]*redis.Cmd, len(batch))
			var wait *redis.IntCmd
			for try := 0; try < 2; try++ {
				pipe := node.Pipeline()
				for j, i := range batch {
					cmds[j] = redis.NewCmd(ctx, args[i]...)
					_ = pipe.Process(ctx, cmds[j])
				}
				wait = ack.wait(ctx)
				_ = pipe.Process(ctx, wait)
				_, _ = pipe.Exec(ctx) // every command has its own error
				if try > 0 || !isNoScript(cmds[0].Err()) || refreshScript.load(ctx, node) != nil {
					break
				}
			}
			replicas, werr := wait.Result()
			for j, i := range batch {
				n, err := cmds[j].Int64()
				reloadAfter(cc, err)
				codes[i], errs[i], acks[i] = '0'+byte(n), err, ackResult{replicas, werr}
			}
		})
	}
	wg.Wait()
	return codes, errs, acks
}

// pipeline renews a batch of locks one refresh.lua call each, in one
// pipeline: for a Cluster or a Ring, whose locks live on many servers.
func (s *watchdog) pipeline(ctx context.Context, args [][]any) ([]byte, []error, error) {
	cmds, err := s.l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range args {
			p.Do(ctx, a...)
		}
		return nil
	})
	if err != nil && !errors.As(err, new(redis.Error)) {
		reloadAfter(s.l.client, err)
		return nil, nil, err // the connection failed: no reply is usable
	}
	codes := make([]byte, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		n, err := c.(*redis.Cmd).Int64()
		if isNoScript(err) {
			return nil, nil, err
		}
		codes[i], errs[i] = '0'+byte(n), err
	}
	return codes, errs, nil
}

// renewal returns the command that renews lk, built once per lease length:
// a renewal allocates nothing of its own. Called with s.mu held; the
// command is not changed while it is on the wire, for a lock has one
// renewal in flight at a time and its ttl changes only under s.mu.
func (lk *lock) renewal() []any {
	if lk.sched.renewArgs == nil || lk.sched.renewTTL != lk.sched.ttl {
		lk.sched.renewArgs = refreshScript.args(lk.leaseKeys(), lk.tokenArg, lk.ownerArg, lk.leaseArg(lk.sched.ttl))
		lk.sched.renewTTL = lk.sched.ttl
	}
	return lk.sched.renewArgs
}

// lockHeap orders locks by due time.
type lockHeap []*lock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].sched.due.Before(h[j].sched.due) }
func (h lockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sched.index, h[j].sched.index = i, j
}
func (h *lockHeap) Push(x any) {
	lk := x.(*lock)
	lk.sched.index = len(*h)
	*h = append(*h, lk)
}
func (h *lockHeap) Pop() any {
	old := *h
	lk := old[len(old)-1]
	old[len(old)-1] = nil
	lk.sched.index = -1
	*h = old[:len(old)-1]
	return lk
}
