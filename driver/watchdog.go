package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// Lease is a held lock's lease as a [Watchdog] keeps it: its local
// deadline and the watchdog's plan for renewing it. A driver's handle
// embeds it, so that watching a lock costs no allocation; the watchdog
// guards it with its own mutex, and the driver reads it only through the
// watchdog's methods.
//
// While the watchdog watches the lease, it keeps the lease's state in a
// table of its own, and the handle's Lease has only the lease's place
// there: a handle whose renewal is due has been out of the processor's
// cache since the last one, and scheduling and filing renewals read the
// table alone. The handle's Lease has the state again when the lease
// leaves the watchdog.
type Lease struct {
	slot      int32 // its slot in the watchdog's heap, plus one; 0 when not there
	renew     bool
	inflight  bool // a renewal is on the wire
	releasing bool // the holder began to release: no more renewals
	ttl       time.Duration
	deadline  time.Time // local lease deadline, on the monotonic clock
	due       time.Time // next time the watchdog looks at this lease
	gen       uint64    // the lease's generation: a Refresh starts a new one
	lastErr   error     // why the last renewal failed
}

func (ls *Lease) lease() *Lease { return ls }

// Leased is a driver's lock handle that a [Watchdog] can keep: a pointer
// type, such as *lock, to a struct that embeds a [Lease].
type Leased interface {
	comparable
	lease() *Lease
}

// Renewal is one lease of a batch that a [Watchdog] asks its driver to
// renew: the handle, and the lease length to set.
type Renewal[L Leased] struct {
	Lock L
	TTL  time.Duration
}

// WatchdogConfig is what a driver gives its [Watchdog].
type WatchdogConfig[L Leased] struct {
	// Drift is the margin taken off every lease for the server's clock.
	Drift Drift
	// Renew renews a batch of leases, all sent after the moment the
	// watchdog passes as sent, and returns one error per lease: nil when
	// renewed, an error matching dlock.ErrOwnershipLost when the server
	// no longer has the lock, any other error when the renewal did not
	// reach the server (the watchdog tries again until the deadline).
	// ctx ends at the earliest deadline of the batch. batch is the
	// watchdog's buffer, to read during the call only; the errors are read
	// before the next call, so Renew may answer in a buffer of its own.
	// Required.
	Renew func(ctx context.Context, batch []Renewal[L]) []error
	// Lost ends a lease that is lost: cause matches dlock.ErrOwnershipLost
	// (a renewal was refused) or dlock.ErrLeaseExpired (the deadline
	// passed). Required.
	Lost func(lk L, cause error)
	// Lapsed ends a lease whose holder began to release it (Releasing)
	// when its deadline passes without a release that confirmed it: the
	// lease has lapsed on the server by then. Required.
	Lapsed func(lk L)
	// MaxBatch bounds the leases of one batch. Zero means 1000.
	MaxBatch int
	// OnFailure, when not nil, hears of every batch whose renewals failed
	// for want of the server, with the first error.
	OnFailure func(batch int, err error)
	// Renewed, when not nil, hears of the outcome of every renewal of a
	// lease still watched: nil when renewed, else its error. A refusal
	// that a release in flight explains is no renewal, and is not told.
	// It is called on the renewer's goroutine, after the batch is filed.
	Renewed func(lk L, err error)
}

// Watchdog renews the leases of one Locker's held locks and ends those
// that are lost, with two goroutines whatever the number of locks. It
// keeps every lease in a heap ordered by the next moment it needs
// attention:
//
//   - a lease with renewal on is renewed ttl/3 after it began; the leases
//     that fall due within ttl/10 of each other go to the driver in one
//     batch (of at most MaxBatch), so that the cost is a few round trips
//     per period whatever the number of locks;
//   - a lease whose renewal failed for want of the server is retried every
//     ttl/20 (at least 10ms, at most 1s) until its deadline;
//   - a lease whose local deadline passes (renewal off, or the server out
//     of reach) is declared lost at that deadline, with
//     dlock.ErrLeaseExpired, before the server could hand the lock to
//     someone else. The deadline is kept by the watchdog's clock, never by
//     the goroutine that waits on the network.
//
// A renewal the server refuses loses the lease at once. Leases have
// generations: a Refresh that comes while a renewal is on the wire starts a
// new one, and the renewal can then only shorten the lease, for the server
// applied the two in an order nobody knows; the lease is renewed again as
// soon as that renewal's reply comes, at the Refresh's TTL, whose cadence
// the renewals keep from then on.
//
// The zero Watchdog is not usable: call Init. Its goroutines start with the
// first lease and end with Stop.
type Watchdog[L Leased] struct {
	cfg WatchdogConfig[L]

	mu      sync.Mutex
	leases  leaseHeap[L]
	batch   []due[L] // due for renewal, waiting for the renewer
	started bool
	stopped bool

	epoch   time.Time     // the origin of the heap's due times (see at)
	timer   *time.Timer   // wakes the scheduler at next
	next    time.Time     // when the scheduler looks at the heap next; zero: never
	kick    chan struct{} // batch has work
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup

	// The renewer's buffers, reused batch after batch so that renewing
	// allocates nothing per lease; only the renewer's goroutine uses them.
	items []Renewal[L]
	gens  []uint64
	told  []int

	// The scheduler's buffers for many leases at once (see takeMany).
	top  []int
	mark []attention
}

// due is a lease due for renewal, and its slot in the watchdog's heap
// when it was found due.
type due[L Leased] struct {
	lk   L
	slot int32
}

// coalesce: a renewal due within ttl/coalesce of another's joins its
// batch, a little early.
const coalesce = 10

// Init prepares the watchdog. It fails when a required function is nil.
func (w *Watchdog[L]) Init(cfg WatchdogConfig[L]) error {
	if cfg.Renew == nil || cfg.Lost == nil || cfg.Lapsed == nil {
		return errors.New("dlock/driver: a Watchdog needs Renew, Lost and Lapsed")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1000
	}
	w.cfg = cfg
	w.kick = make(chan struct{}, 1)
	w.epoch = time.Now()
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return nil
}

// at is t as the heap orders it: nanoseconds since w.epoch, on the
// monotonic clock when t has a reading of it.
func (w *Watchdog[L]) at(t time.Time) int64 { return int64(t.Sub(w.epoch)) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Add starts watching the lease of lk, which began at start (the moment
// before the request that set it was sent) and lasts ttl; renew says
// whether to renew it. Its deadline is start + ttl less the drift margin.
func (w *Watchdog[L]) Add(lk L, start time.Time, ttl time.Duration, renew bool) {
	w.AddUntil(lk, w.cfg.Drift.Deadline(start, ttl), ttl, renew)
}

// AddUntil is Add with the local deadline given: for a lease whose
// validity the driver counted itself (a quorum's, say). The first renewal
// is due when a third of what is left of the lease has passed.
func (w *Watchdog[L]) AddUntil(lk L, deadline time.Time, ttl time.Duration, renew bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := w.leases.index(lk); i >= 0 {
		w.leases.remove(i)
	}
	ls := lk.lease()
	ls.ttl, ls.renew, ls.deadline = ttl, renew, deadline
	if w.stopped {
		return
	}
	if !w.started {
		w.started = true
		w.timer = time.NewTimer(time.Hour)
		w.timer.Stop()
		w.running.Add(2)
		go w.schedule()
		go w.renewLoop()
	}
	ls.due = deadline
	if renew {
		now := time.Now()
		ls.due = now.Add(min(deadline.Sub(now)/3, ttl/3))
	}
	w.leases.push(lk, w.at(ls.due))
	w.arm(ls.due)
}

// arm makes the scheduler look at the heap no later than t. It resets the
// timer rather than waking the goroutine, so that a lock acquired and
// released between two renewals costs the scheduler nothing. Called with
// w.mu held.
func (w *Watchdog[L]) arm(t time.Time) {
	if w.next.IsZero() || t.Before(w.next) {
		w.next = t
		w.timer.Reset(time.Until(t))
	}
}

// Remove stops watching lk.
func (w *Watchdog[L]) Remove(lk L) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := w.leases.index(lk); i >= 0 {
		w.leases.remove(i)
	}
}

// state returns lk's lease state, in the heap's table while lk is watched
// (with its index in the heap), in its handle otherwise (with -1). Called
// with w.mu held; the state is valid until the heap's next push or
// remove.
func (w *Watchdog[L]) state(lk L) (*Lease, int) {
	ls := lk.lease()
	i := w.leases.indexAt(lk, ls.slot-1)
	if i < 0 {
		return ls, -1
	}
	_, st := w.leases.slot(ls.slot - 1)
	return st, i
}

// stateAt is state for a lease that had slot s: it reads the heap's table
// alone while lk still has that slot.
func (w *Watchdog[L]) stateAt(lk L, s int32) (*Lease, int) {
	if i := w.leases.indexAt(lk, s); i >= 0 {
		_, st := w.leases.slot(s)
		return st, i
	}
	return w.state(lk)
}

// Deadline returns lk's local lease deadline.
func (w *Watchdog[L]) Deadline(lk L) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls, _ := w.state(lk)
	return ls.deadline
}

// Renewing reports whether a renewal of lk is on the wire: sent, and its
// result not yet filed.
func (w *Watchdog[L]) Renewing(lk L) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls, _ := w.state(lk)
	return ls.inflight
}

// Refreshed records a lease of ttl that the holder asked for at time sent,
// and starts a new generation of the lease: a renewal sent before can no
// longer lengthen it. When the outcome is unknown (applied is false), the
// server may or may not have applied it, and the lease is the shorter of
// the old one and the new. The watchdog renews ttl from now on.
func (w *Watchdog[L]) Refreshed(lk L, sent time.Time, ttl time.Duration, applied bool) {
	w.RefreshedUntil(lk, w.cfg.Drift.Deadline(sent, ttl), sent, ttl, applied)
}

// RefreshedUntil is Refreshed with the new local deadline given.
func (w *Watchdog[L]) RefreshedUntil(lk L, deadline, sent time.Time, ttl time.Duration, applied bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls, i := w.state(lk)
	ls.gen++
	ls.ttl = ttl
	old := ls.deadline
	ls.deadline = deadline
	if !applied && old.Before(deadline) {
		ls.deadline = old
	}
	if i < 0 {
		return
	}
	switch {
	case !ls.inflight && !ls.releasing:
		ls.due = ls.deadline
		if ls.renew {
			ls.due = sent.Add(ttl / 3)
		}
	case ls.due.After(ls.deadline):
		ls.due = ls.deadline
	default:
		return
	}
	w.leases.fix(i, w.at(ls.due))
	w.arm(ls.due)
}

// Releasing stops renewing lk, whose holder began to release it: a release
// may delete the lock at any moment, after which a renewal would find it
// gone. The watchdog still watches the deadline, where it calls Lapsed if
// nothing ended the lease before.
//
// When lk's deadline has passed, the lease ended before its holder let
// go, however late the watchdog is to say so (a process paused, say):
// Releasing then stops watching it and returns the cause of the loss,
// matching dlock.ErrLeaseExpired, with which the caller ends the handle as
// lost instead of releasing it. A second call, for a release retried, is
// nil.
func (w *Watchdog[L]) Releasing(lk L) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls, i := w.state(lk)
	if ls.releasing {
		return nil
	}
	if !time.Now().Before(ls.deadline) {
		cause := expired(ls.lastErr)
		if i >= 0 {
			w.leases.remove(i)
		}
		return cause
	}
	ls.releasing, ls.renew = true, false
	if i >= 0 && !ls.inflight {
		ls.due = ls.deadline
		w.leases.fix(i, w.at(ls.due))
		w.arm(ls.due)
	}
	return nil
}

// Stop ends the watchdog's goroutines and waits for them. Leases still
// watched are neither renewed nor ended.
func (w *Watchdog[L]) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.running.Wait()
}

// schedule is the scheduler's goroutine: it hands due leases to the
// renewer and ends the leases whose deadline passed.
func (w *Watchdog[L]) schedule() {
	defer w.running.Done()
	defer w.timer.Stop()
	for {
		now := time.Now()
		var expired []L
		w.mu.Lock()
		if !w.takeMany(now, &expired) {
		due:
			for w.leases.len() > 0 {
				s := w.leases.first()
				lk, ls := w.leases.slot(s)
				switch ls.attention(now) {
				case expires:
					w.leases.remove(0)
					expired = append(expired, lk)
				case renews:
					ls.inflight = true
					ls.due = ls.deadline // still watched while on the wire
					w.leases.fix(0, w.at(ls.due))
					w.batch = append(w.batch, due[L]{lk, s})
				case watches:
					ls.due = ls.deadline // nothing to send: watch the deadline
					w.leases.fix(0, w.at(ls.due))
				default:
					break due
				}
			}
		}
		if len(w.batch) > 0 {
			signal(w.kick)
		}
		w.next = time.Time{}
		if w.leases.len() > 0 {
			_, ls := w.leases.slot(w.leases.first())
			w.arm(ls.due)
		}
		w.mu.Unlock()
		for _, lk := range expired {
			w.expire(lk)
		}
		select {
		case <-w.timer.C:
		case <-w.ctx.Done():
			return
		}
	}
}

// attention is what a lease needs of the scheduler.
type attention uint8

const (
	waits   attention = iota // nothing yet
	expires                  // its deadline passed
	renews                   // due now or soon: renewals that fall due together share a batch
	watches                  // due, with nothing to send: its deadline is watched
)

// attention returns what ls needs of the scheduler at now.
func (ls *Lease) attention(now time.Time) attention {
	switch {
	case !now.Before(ls.deadline):
		return expires
	case ls.renew && !ls.inflight && !ls.due.After(now.Add(ls.ttl/coalesce)):
		return renews
	case !ls.due.After(now):
		return watches
	}
	return waits
}

// takeMany is the scheduler's loop for many leases that need it at once
// (more than an eighth of the heap), as when many locks taken together
// fall due together. The loop moves each lease it attends to along a path
// of the heap, at random in memory; takeMany finds the leases in one walk
// of the top of the heap, where they are (a lease that waits has none of
// them below it, for they are due no earlier), changes them in place,
// reorders the heap in one pass, and hands the renewer its batch in the
// order of the slots. It reports whether it did; called with w.mu held.
func (w *Watchdog[L]) takeMany(now time.Time, expired *[]L) bool {
	h := &w.leases
	n := h.len()
	if n < 64 {
		return false
	}
	top := w.top[:0]
	if _, ls := h.slot(h.first()); ls.attention(now) != waits {
		top = append(top, 0)
	}
	for j := 0; j < len(top); j++ {
		for c, end := arity*top[j]+1, min(arity*top[j]+1+arity, n); c < end; c++ {
			if _, ls := h.slot(h.es[c].slot); ls.attention(now) != waits {
				top = append(top, c)
			}
		}
	}
	w.top = top[:0]
	if len(top) <= n/8 {
		return false
	}
	mark := grow(w.mark, len(h.st))
	clear(mark)
	w.mark = mark
	for _, i := range top {
		s := h.es[i].slot
		_, ls := h.slot(s)
		switch ls.attention(now) {
		case expires:
			mark[s] = expires // taken out below, once the heap is in order
		case renews:
			ls.inflight = true
			ls.due = ls.deadline // still watched while on the wire
			h.set(i, w.at(ls.due))
			mark[s] = renews
		case watches:
			ls.due = ls.deadline // nothing to send: watch the deadline
			h.set(i, w.at(ls.due))
		}
	}
	h.order()
	for s, m := range mark {
		switch m {
		case renews:
			w.batch = append(w.batch, due[L]{h.st[s].lk, int32(s)})
		case expires:
			lk := h.st[s].lk
			h.remove(h.indexAt(lk, int32(s)))
			*expired = append(*expired, lk)
		}
	}
	return true
}

func (w *Watchdog[L]) expire(lk L) {
	ls := lk.lease()
	w.mu.Lock()
	cause, released := ls.lastErr, ls.releasing
	w.mu.Unlock()
	if released {
		w.cfg.Lapsed(lk)
		return
	}
	w.cfg.Lost(lk, expired(cause))
}

// expired is the cause of a lease lost at its deadline, whose last renewal
// failed with renewErr (nil: none failed).
func expired(renewErr error) error {
	if renewErr == nil {
		return dlock.ErrLeaseExpired
	}
	return fmt.Errorf("%w: renewal failed: %w", dlock.ErrLeaseExpired, renewErr)
}

// renewLoop is the renewer's goroutine: it sends the due renewals in
// batches.
func (w *Watchdog[L]) renewLoop() {
	defer w.running.Done()
	var spare []due[L] // the scheduler's next batch: two buffers take turns
	for {
		select {
		case <-w.kick:
		case <-w.ctx.Done():
			return
		}
		w.mu.Lock()
		batch := w.batch
		w.batch = spare
		w.mu.Unlock()
		for rest := batch; len(rest) > 0; {
			n := min(len(rest), w.cfg.MaxBatch)
			w.renew(rest[:n])
			rest = rest[n:]
		}
		clear(batch) // holds no lease alive
		spare = batch[:0]
	}
}

// renew sends one batch of renewals and files the results.
func (w *Watchdog[L]) renew(batch []due[L]) {
	w.mu.Lock()
	items := grow(w.items, len(batch))
	gens := grow(w.gens, len(batch))
	w.items, w.gens = items, gens
	defer clear(items) // holds no lease alive
	var deadline time.Time
	for i, d := range batch {
		ls, _ := w.stateAt(d.lk, d.slot)
		items[i], gens[i] = Renewal[L]{Lock: d.lk, TTL: ls.ttl}, ls.gen
		if i == 0 || ls.deadline.Before(deadline) {
			deadline = ls.deadline
		}
	}
	w.mu.Unlock()
	// A renewal that lands after the earliest deadline is of no use to that
	// lease; the others retry soon.
	ctx, cancel := context.WithDeadline(w.ctx, deadline)
	sent := time.Now()
	errs := w.cfg.Renew(ctx, items)
	cancel()
	if len(errs) != len(items) {
		err := fmt.Errorf("dlock/driver: Renew answered %d results for %d leases", len(errs), len(items))
		errs = make([]error, len(items))
		for i := range errs {
			errs[i] = err
		}
	}
	now := time.Now()
	var (
		lost   []Renewal[L]
		causes []error
		failed error
		nfail  int
		told   = w.told[:0] // the leases whose outcome Renewed hears of
	)
	w.mu.Lock()
	// A batch of many of the leases is filed in the heap's order once
	// filed, in one pass over the heap, rather than one lease at a time,
	// each of which reads a path of the heap at random: the renewer is
	// then busy for a shorter time, and the runtime's monitor, which a
	// busy process wakes, with it.
	bulk := len(batch) > w.leases.len()/8
	for i, d := range batch {
		ls, at := w.stateAt(d.lk, d.slot)
		ls.inflight = false
		if at < 0 {
			continue // ended meanwhile
		}
		ttl, err := items[i].TTL, errs[i]
		if w.cfg.Renewed != nil && !(errors.Is(err, dlock.ErrOwnershipLost) && ls.releasing) {
			told = append(told, i)
		}
		switch {
		case err == nil:
			ls.lastErr = nil
			d := w.cfg.Drift.Deadline(sent, ttl)
			if ls.gen == gens[i] {
				ls.deadline = d
				ls.due = sent.Add(ttl / 3)
			} else {
				// A Refresh came while this renewal was on the wire: the
				// server applied the two in an unknown order, so the
				// shorter lease is the one to count on, and the server
				// may keep the renewal's TTL rather than the Refresh's.
				// Renew at once, for the lease the holder asked last.
				if d.Before(ls.deadline) {
					ls.deadline = d
				}
				ls.due = now
			}
			if ls.releasing || ls.deadline.Before(ls.due) {
				ls.due = ls.deadline
			}
		case errors.Is(err, dlock.ErrOwnershipLost) && ls.releasing:
			// the release deleted the lock after this renewal was sent
			ls.due = ls.deadline
		case errors.Is(err, dlock.ErrOwnershipLost):
			lost, causes = append(lost, items[i]), append(causes, err)
			w.leases.remove(at)
			continue
		default:
			if failed == nil {
				failed = err
			}
			nfail++
			ls.lastErr = err
			ls.due = now.Add(min(max(ls.ttl/20, 10*time.Millisecond), time.Second))
			if ls.due.After(ls.deadline) {
				ls.due = ls.deadline
			}
		}
		if bulk {
			w.leases.set(at, w.at(ls.due))
		} else {
			w.leases.fix(at, w.at(ls.due))
		}
		w.arm(ls.due)
	}
	if bulk {
		w.leases.order()
	}
	w.mu.Unlock()
	for _, i := range told {
		w.cfg.Renewed(batch[i].lk, errs[i])
	}
	w.told = told
	if failed != nil && w.cfg.OnFailure != nil {
		w.cfg.OnFailure(nfail, failed)
	}
	for i, r := range lost {
		w.cfg.Lost(r.Lock, causes[i])
	}
}

// grow returns buf resliced to n, reallocated when too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}
