package rediswait

import (
	"context"
	"sync"
	"time"
)

// subscribe sends the subscription of sub to channel to each of its
// targets, on the target's connection, opened if need be; with wait, it
// returns when every send ended, else at once, the sends going on until
// ctx's deadline in goroutines that Stop waits for.
func (s *Subscriber) subscribe(ctx context.Context, channel string, sub *subscription, wait bool) {
	targets, err := s.cfg.Route(ctx, channel)
	if err != nil {
		s.unrouted(ctx, channel, sub, err)
		return
	}
	if len(targets) == 1 && wait {
		s.link(ctx, channel, sub, 0, targets[0])
		return
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if !wait { // not waited for: a target that does not answer holds up only its own send
		d, _ := ctx.Deadline()
		sctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	stop := context.AfterFunc(s.closing, cancel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { s.link(sctx, channel, sub, i, t) })
	}
	if wait {
		wg.Wait()
		stop()
		cancel()
		return
	}
	if !s.Start() {
		wg.Wait()
		return
	}
	go func() {
		defer s.Done()
		wg.Wait()
		stop()
		cancel()
	}()
}

// unrouted logs that channel could not be routed, and drops sub when it
// is subscribed nowhere: the next waiter tries again.
func (s *Subscriber) unrouted(ctx context.Context, channel string, sub *subscription, err error) {
	s.cfg.Log.WarnContext(ctx, "subscribe failed", "channel", channel, "error", err)
	s.mu.Lock()
	if s.subs[channel] == sub && sub.sent() == 0 {
		delete(s.subs, channel)
	}
	s.mu.Unlock()
}

// link subscribes sub to channel on its target i, at target, on the
// connection of target, opened if need be.
func (s *Subscriber) link(ctx context.Context, channel string, sub *subscription, i int, target string) {
	s.mu.Lock()
	if s.stopped || s.subs[channel] != sub || sub.conns[i] != nil {
		s.mu.Unlock()
		return
	}
	c := s.conns[target]
	opened := c == nil
	if opened {
		c = &conn{target: target, ps: s.cfg.Dial(context.WithoutCancel(ctx), target)}
		s.conns[target] = c
		s.running.Add(1) // for its receive goroutine, started below
	}
	c.subs++
	sub.conns[i] = c
	s.mu.Unlock()
	// Sent outside s.mu: it may dial, for as long as ctx lets it.
	if err := c.ps.SSubscribe(ctx, channel); err != nil {
		s.cfg.Log.WarnContext(ctx, "subscribe failed", "channel", channel, "target", target, "error", err)
	}
	if opened {
		// Only now: a Cluster client dials a subscription connection
		// without channels to a random node, and the first channel, even
		// if its subscription failed, routes every reconnection.
		go s.receive(c)
	}
}

// leave takes one subscription off c, and closes c when none is left: a
// Cluster connection without channels would be re-dialled to a random
// node. The caller holds s.mu.
func (s *Subscriber) leave(c *conn) {
	if c.subs--; c.subs > 0 {
		return
	}
	if s.conns[c.target] == c {
		delete(s.conns, c.target)
	}
	s.running.Add(1)
	go func() { // not under s.mu: Stop waits for a dial in progress
		defer s.running.Done()
		c.ps.Close()
	}()
}

// move takes the subscription of channel off its target i and, after a
// pause that grows with each move, subscribes it again where the cluster
// says its slot lives now; a subscription nobody waits on is dropped
// instead. The caller holds s.mu.
func (s *Subscriber) move(channel string, sub *subscription, i int) {
	c := sub.conns[i]
	if c == nil {
		return // already moving
	}
	sub.conns[i], sub.confirmed[i] = nil, false
	s.leave(c)
	if len(sub.waiters) == 0 && sub.sent() == 0 {
		delete(s.subs, channel)
	}
	sub.moves[i]++
	pause := min(10*time.Millisecond<<min(sub.moves[i], 7), time.Second)
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		ctx, cancel := context.WithTimeout(s.closing, max(s.SubscribeTimeout, time.Second))
		defer cancel()
		// Out of the client's set, so that a reconnection does not take it
		// back to the old target.
		c.ps.SUnsubscribe(ctx, channel)
		if s.cfg.Reload != nil {
			s.cfg.Reload(ctx)
		}
		select {
		case <-time.After(pause):
		case <-s.quit:
			return
		}
		targets, err := s.cfg.Route(ctx, channel)
		if err != nil {
			s.unrouted(ctx, channel, sub, err)
			return
		}
		s.link(ctx, channel, sub, i, targets[i])
	}()
}
