package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errLeaseClosed is the Err of a lease that its Locker closed on purpose.
var errLeaseClosed = errors.New("dlock: lease closed")

// drift is the margin taken off every lease: a tenth, for etcd's leases
// are counted by whichever member leads, on its own clock.
var drift = driver.Drift{Divisor: 10}

// lease is one etcd lease that holds keys: renewed by its keeper every
// ttl/3, or pinned (it runs out unless Refresh extends it). It is lost, and
// done is closed, when etcd says the lease is gone or when its local
// deadline passes without a renewal. The deadline counts from the moment
// before the request that set the lease was sent (the grant, a keep-alive,
// a Refresh), so that a late reply never moves it past the server's expiry.
//
// A lease that ends for any reason stops being kept alive at once: etcd
// lets it run out within its TTL, and the keys on it go with it, so that no
// key stays on a lease that nothing owns.
type lease struct {
	cli    *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration // whole seconds
	renew  bool          // kept alive by the keeper; else pinned
	shared bool
	// tok names the keys that the lease's holds reuse (see names.go);
	// retire replaces it.
	tok atomic.Pointer[string]

	renewed func(*lease, error) // reports each keep-alive's outcome; nil: nobody watches

	stop  context.CancelFunc // stops the keeper
	reset chan time.Time     // a later local deadline, after a Refresh

	once sync.Once
	done chan struct{}
	err  error // set before done closes
	// ctx ends with err as its cause when the lease ends, to cut short
	// the calls of a waiter whose session ended.
	ctx     context.Context
	ctxStop context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // the local deadline, as the keeper last set it
	// paused counts the keys on the lease whose delete is pending (see
	// pause): the keeper renews the lease only while there are none.
	paused  int
	resumed chan struct{} // wakes the keeper when paused drops to 0
}

// newLease grants a lease of ttl (whole seconds) and starts its keeper,
// counted in wg; renewed, when not nil, hears the outcome of every
// keep-alive. A grant whose reply came too late to leave any of the
// lease is revoked and reported as an error.
func newLease(ctx context.Context, cli *clientv3.Client, ttl time.Duration, renew bool, wg *sync.WaitGroup, renewed func(*lease, error)) (*lease, error) {
	t0 := time.Now()
	g, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	// etcd may grant more than asked (its minimum lease is 1.5 election
	// timeouts): the local deadline follows what the server holds.
	granted := max(ttl, time.Duration(g.TTL)*time.Second)
	deadline := drift.Deadline(t0, granted)
	if !time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		cli.Revoke(rctx, g.ID)
		cancel()
		return nil, fmt.Errorf("%w: lease %x was granted after its local deadline", dlock.ErrLeaseExpired, int64(g.ID))
	}
	ls := &lease{cli: cli, id: g.ID, ttl: ttl, renew: renew, renewed: renewed, done: make(chan struct{}), reset: make(chan time.Time, 1), resumed: make(chan struct{}, 1)}
	tok := driver.NewToken()
	ls.tok.Store(&tok)
	ls.ctx, ls.ctxStop = context.WithCancelCause(context.Background())
	kctx, stop := context.WithCancel(context.Background())
	ls.stop = stop
	ls.deadline = deadline
	wg.Go(func() { ls.keep(kctx, t0, deadline) })
	return ls, nil
}

// retryDelay paces the keep-alives of a lease whose last one failed.
func retryDelay(ttl time.Duration) time.Duration {
	return min(max(ttl/20, 100*time.Millisecond), time.Second)
}

// keep is the lease's goroutine. A renewed lease is kept alive by one
// KeepAliveOnce every ttl/3 (sooner after a failure), each bounded by the
// local deadline, except while it is paused; a pinned lease only has its
// deadline watched.
func (ls *lease) keep(ctx context.Context, start, deadline time.Time) {
	next := deadline
	if ls.renew {
		next = start.Add(ls.ttl / 3)
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-ls.reset:
			if d.After(deadline) {
				deadline = d
				ls.noteDeadline(deadline)
			}
			if !ls.renew {
				next = deadline
			}
			timer.Reset(time.Until(next))
			continue
		case <-ls.resumed:
			timer.Reset(time.Until(next)) // at once when a renewal was held back
			continue
		case <-timer.C:
		}
		if !time.Now().Before(deadline) {
			if ls.isPaused() {
				ls.lose(fmt.Errorf("%w: lease %x: not renewed while a key on it waited for a delete that etcd did not answer", dlock.ErrLeaseExpired, int64(ls.id)))
			} else if lastErr != nil {
				ls.lose(fmt.Errorf("%w: lease %x: no keep-alive reached etcd in time: %w", dlock.ErrLeaseExpired, int64(ls.id), lastErr))
			} else {
				ls.lose(fmt.Errorf("%w: lease %x of %v ran out", dlock.ErrLeaseExpired, int64(ls.id), ls.ttl))
			}
			return
		}
		if !ls.renew || ls.isPaused() {
			timer.Reset(time.Until(deadline))
			continue
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := ls.cli.KeepAliveOnce(rctx, ls.id)
		cancel()
		ls.observe(ctx, resp, err)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && resp.TTL <= 0:
			ls.lose(fmt.Errorf("%w: etcd no longer has lease %x", dlock.ErrOwnershipLost, int64(ls.id)))
			return
		case err != nil:
			lastErr = err
			next = time.Now().Add(retryDelay(ls.ttl))
		default:
			lastErr = nil
			d := time.Duration(resp.TTL) * time.Second
			if nd := drift.Deadline(sent, d); nd.After(deadline) {
				deadline = nd
				ls.noteDeadline(deadline)
			}
			next = sent.Add(d / 3)
		}
		if next.After(deadline) {
			next = deadline
		}
		timer.Reset(time.Until(next))
	}
}

// pause holds back the renewal of the lease until resume is called (once
// for each pause): a key on it that a release or an attempt left behind,
// whose delete etcd did not answer, must not be kept alive for nobody.
// While the delete is pending the lease is not renewed, so that it runs
// out, and the key with it, unless the delete lands first; when it does,
// the renewal that was held back is sent at once. A keep-alive already
// in flight when pause is called still counts.
func (ls *lease) pause() (resume func()) {
	ls.mu.Lock()
	ls.paused++
	ls.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			ls.mu.Lock()
			ls.paused--
			n := ls.paused
			ls.mu.Unlock()
			if n == 0 {
				select {
				case ls.resumed <- struct{}{}:
				default:
				}
			}
		})
	}
}

// isPaused reports whether a pause holds back the lease's renewal.
func (ls *lease) isPaused() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.paused > 0
}

// noteDeadline records the local deadline that the keeper keeps.
func (ls *lease) noteDeadline(d time.Time) {
	ls.mu.Lock()
	ls.deadline = d
	ls.mu.Unlock()
}

// localDeadline returns the local deadline.
func (ls *lease) localDeadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

// lose ends the lease with err, once, and stops keeping it alive.
func (ls *lease) lose(err error) {
	ls.once.Do(func() {
		ls.err = err
		close(ls.done)
		ls.ctxStop(err)
		ls.stop()
	})
}

// ended returns the channel closed when the lease ends; for no lease (ls
// nil), a nil channel, which never delivers.
func (ls *lease) ended() <-chan struct{} {
	if ls == nil {
		return nil
	}
	return ls.done
}

// lost reports whether the lease has ended.
func (ls *lease) lost() bool {
	select {
	case <-ls.done:
		return true
	default:
		return false
	}
}

// extend moves the local deadline after a refresh of the lease whose
// request was sent at t0.
func (ls *lease) extend(t0 time.Time) {
	select {
	case <-ls.reset:
	default:
	}
	ls.reset <- drift.Deadline(t0, ls.ttl)
}

// close ends the lease and revokes it on the server, which deletes every
// key still attached to it. A lease already lost is not revoked: it is
// gone, or etcd cannot be reached, and nothing keeps it alive any more.
func (ls *lease) close(ctx context.Context) error {
	wasLost := ls.lost()
	ls.lose(errLeaseClosed)
	if wasLost {
		return nil
	}
	_, err := ls.cli.Revoke(ctx, ls.id)
	return err
}

// token returns the token that names the keys the lease's holds reuse.
func (ls *lease) token() string { return *ls.tok.Load() }

// retire gives the lease a new token when name, the etcd key of one of
// its holds, carries the current one: a delete of name may still land,
// so no later hold may take that name (see names.go).
func (ls *lease) retire(name string) {
	for {
		cur := ls.tok.Load()
		if !strings.HasSuffix(name, "/"+*cur) {
			return
		}
		tok := driver.NewToken()
		if ls.tok.CompareAndSwap(cur, &tok) {
			return
		}
	}
}
