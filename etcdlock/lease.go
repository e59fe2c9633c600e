package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errLeaseClosed is the Err of a lease that its Locker closed on purpose.
var errLeaseClosed = errors.New("dlock: lease closed")

// driftDivisor sets the drift margin: the local lease deadline is the last
// keep-alive answer (or the grant) plus ttl - ttl/driftDivisor.
const driftDivisor = 10

// lease is one etcd lease that holds keys: a concurrency.Session that keeps
// it alive (renewed), or a bare lease that runs out (pinned). It is lost,
// and done is closed, when the session ends, when etcd says the lease is
// gone, or when the local lease deadline passes without a keep-alive answer.
type lease struct {
	cli    *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration // whole seconds
	sess   *concurrency.Session
	shared bool

	cancel context.CancelFunc // stops the watch goroutine
	reset  chan time.Time     // new local deadline (pinned leases, on refresh)

	once sync.Once
	done chan struct{}
	err  error // set before done closes
	// ctx ends with err as its cause when the lease ends, to cut short
	// the calls of a waiter whose session ended.
	ctx     context.Context
	ctxStop context.CancelCauseFunc
}

func drift(ttl time.Duration) time.Duration { return ttl / driftDivisor }

// newLease grants a lease of ttl (whole seconds) and, when renew is set,
// keeps it alive with a concurrency.Session. Its watch goroutine is
// counted in wg.
func newLease(ctx context.Context, cli *clientv3.Client, ttl time.Duration, renew bool, wg *sync.WaitGroup) (*lease, error) {
	sec := int64(ttl / time.Second)
	t0 := time.Now()
	g, err := cli.Grant(ctx, sec)
	if err != nil {
		return nil, err
	}
	ls := &lease{cli: cli, id: g.ID, ttl: ttl, done: make(chan struct{}), reset: make(chan time.Time, 1)}
	ls.ctx, ls.ctxStop = context.WithCancelCause(context.Background())
	wctx, cancel := context.WithCancel(context.Background())
	ls.cancel = cancel
	var kach <-chan *clientv3.LeaseKeepAliveResponse
	if renew {
		ls.sess, err = concurrency.NewSession(cli, concurrency.WithLease(g.ID), concurrency.WithTTL(int(sec)))
		if err == nil {
			// A second listener on the same keep-alive stream: the session
			// drains its own channel and hides the answers, and the local
			// deadline needs them.
			kach, err = cli.KeepAlive(wctx, g.ID)
		}
		if err != nil {
			cancel()
			if ls.sess != nil {
				ls.sess.Orphan()
			}
			ls.ctxStop(err)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			cli.Revoke(rctx, g.ID)
			rcancel()
			return nil, err
		}
	}
	// etcd may grant more than asked (its minimum lease is 1.5 election
	// timeouts): the local deadline follows what the server holds.
	granted := max(ttl, time.Duration(g.TTL)*time.Second)
	wg.Go(func() { ls.watch(wctx, t0.Add(granted-drift(granted)), kach) })
	return ls, nil
}

// watch declares the lease lost when its local deadline passes, its
// session ends, or etcd stops answering keep-alives for it.
func (ls *lease) watch(ctx context.Context, deadline time.Time, kach <-chan *clientv3.LeaseKeepAliveResponse) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var sessDone <-chan struct{}
	if ls.sess != nil {
		sessDone = ls.sess.Done()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-ls.reset:
			timer.Reset(time.Until(d))
		case resp, ok := <-kach:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				ls.lose(fmt.Errorf("%w: etcd no longer keeps lease %x alive", dlock.ErrOwnershipLost, int64(ls.id)))
				return
			}
			if resp.TTL > 0 {
				d := time.Duration(resp.TTL) * time.Second
				timer.Reset(d - drift(d))
			}
		case <-sessDone:
			if ctx.Err() != nil {
				return
			}
			ls.lose(fmt.Errorf("%w: the session of lease %x ended", dlock.ErrLeaseExpired, int64(ls.id)))
			return
		case <-timer.C:
			if ls.sess != nil {
				ls.lose(fmt.Errorf("%w: no keep-alive answer from etcd for lease %x within %v", dlock.ErrLeaseExpired, int64(ls.id), ls.ttl-drift(ls.ttl)))
			} else {
				ls.lose(fmt.Errorf("%w: lease %x of %v ran out", dlock.ErrLeaseExpired, int64(ls.id), ls.ttl))
			}
			return
		}
	}
}

// lose ends the lease with err, once.
func (ls *lease) lose(err error) {
	ls.once.Do(func() {
		ls.err = err
		close(ls.done)
		ls.ctxStop(err)
	})
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

// extend moves the local deadline of a pinned lease after a refresh that
// started at t0.
func (ls *lease) extend(t0 time.Time) {
	select {
	case <-ls.reset:
	default:
	}
	ls.reset <- t0.Add(ls.ttl - drift(ls.ttl))
}

// close stops the lease's goroutine and revokes it on the server, which
// deletes every key still attached to it. A lease already lost is not
// revoked: it is gone, or etcd cannot be reached.
func (ls *lease) close(ctx context.Context) error {
	wasLost := ls.lost()
	ls.lose(errLeaseClosed)
	defer ls.cancel()
	if wasLost {
		if ls.sess != nil {
			ls.sess.Orphan()
		}
		return nil
	}
	ls.cancel()
	if ls.sess != nil {
		ls.sess.Orphan()
	}
	_, err := ls.cli.Revoke(ctx, ls.id)
	return err
}
