package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// notifier keeps the Locker's subscriptions, one connection per node, and
// hands each grant a node publishes to the waiter it names, and each
// change of a watched lock to every watch of it (see Watch). A release on
// a node hands the lock to the first live waiter queued there and
// publishes "<token> <attempt> <fence>" on the channel of that waiter's
// Locker for the key ("<queue key>:<subscriber id>"), so only that
// waiter's Locker hears it.
type notifier struct {
	l *Locker

	quit    chan struct{}
	closing context.Context
	cancel  context.CancelFunc

	mu      sync.Mutex
	conns   []*redis.PubSub // by node; nil until a waiter needs it
	subs    map[string]*subscription
	stopped bool
	running sync.WaitGroup
}

type subscription struct {
	waiters   map[string]chan grant // by token
	confirmed []bool                // by node
	changed   chan struct{}         // closed, and made again, when a node confirms
	ready     chan struct{}         // closed when every live node confirmed, or the wait for them ended
	idle      time.Time             // when its last waiter left
}

// grant is node's wake-up: a release there handed its part of the lock
// to the waiter (see redisnode.Grant).
type grant struct {
	node int
	redisnode.Grant
}

const (
	// healthCheck is how long a subscription connection may stay silent
	// before it is pinged.
	healthCheck = 5 * time.Second
	// idleChannel is how long a channel without waiters stays subscribed,
	// so that a key waited on again and again is not re-subscribed.
	idleChannel = 30 * time.Second
)

func newNotifier(l *Locker) *notifier {
	closing, cancel := context.WithCancel(context.Background())
	return &notifier{l: l, quit: make(chan struct{}), closing: closing, cancel: cancel,
		conns: make([]*redis.PubSub, len(l.nodes)), subs: make(map[string]*subscription)}
}

// watch registers a waiter for the grants to token on channel, subscribed
// on every node, and returns once every node confirmed the subscription
// or by has passed: the waiter then relies on its fallback timer for the
// nodes that did not. The channel holds the grants not yet received.
func (n *notifier) watch(ctx context.Context, channel, token string, by time.Time) (<-chan grant, func()) {
	return n.subscribe(ctx, channel, token, by, nil)
}

// subscribe is watch, but for enough, when not nil: then it returns once
// enough says that the nodes that confirmed the subscription (by node)
// are enough, or by has passed, without waiting for the other nodes'
// subscriptions to be sent. A caller that passes enough must be one of
// the goroutines that stop waits for (see start).
func (n *notifier) subscribe(ctx context.Context, channel, token string, by time.Time, enough func(confirmed []bool) bool) (<-chan grant, func()) {
	wake := make(chan grant, len(n.l.nodes))
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return wake, func() {}
	}
	sub := n.subs[channel]
	fresh := sub == nil
	if fresh {
		sub = &subscription{waiters: make(map[string]chan grant), confirmed: make([]bool, len(n.l.nodes)),
			changed: make(chan struct{}), ready: make(chan struct{})}
		n.subs[channel] = sub
	}
	sub.waiters[token] = wake
	var send []*redis.PubSub
	if fresh {
		for i, ps := range n.conns {
			if ps == nil {
				ps = n.l.nodes[i].client.SSubscribe(context.WithoutCancel(ctx))
				n.conns[i] = ps
				n.running.Add(1)
				go n.receive(i, ps)
			}
			send = append(send, ps)
		}
	}
	n.mu.Unlock()
	unwatch := func() {
		n.mu.Lock()
		delete(sub.waiters, token)
		if len(sub.waiters) == 0 {
			sub.idle = time.Now()
		}
		n.mu.Unlock()
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	defer context.AfterFunc(n.closing, cancel)()
	switch {
	case fresh && enough == nil:
		var wg sync.WaitGroup
		for _, ps := range send {
			wg.Go(func() { ps.SSubscribe(ctx, channel) })
		}
		wg.Wait()
	case fresh:
		// Not waited for: a node that does not answer holds up only its
		// own send, until by (the client subscribes it again when it
		// reconnects). The caller is one of the goroutines that stop
		// waits for, so that these may be counted too.
		sctx, scancel := context.WithDeadline(context.WithoutCancel(ctx), by)
		stopAfter := context.AfterFunc(n.closing, scancel)
		var wg sync.WaitGroup
		for _, ps := range send {
			wg.Go(func() { ps.SSubscribe(sctx, channel) })
		}
		n.running.Add(1)
		go func() {
			defer n.running.Done()
			wg.Wait()
			stopAfter()
			scancel()
		}()
	}
	if enough != nil {
		for {
			n.mu.Lock()
			ok, changed := enough(sub.confirmed), sub.changed
			n.mu.Unlock()
			if ok {
				return wake, unwatch
			}
			select {
			case <-changed:
				continue
			case <-ctx.Done():
			}
			break
		}
	}
	select {
	case <-sub.ready:
	case <-ctx.Done():
		if fresh { // a node that did not confirm in time does not hold up later waiters
			n.mu.Lock()
			select {
			case <-sub.ready:
			default:
				close(sub.ready)
			}
			n.mu.Unlock()
		}
	}
	return wake, unwatch
}

// ready reports whether channel is subscribed and confirmed, so that a
// waiter may join the queue with its first attempt.
func (n *notifier) ready(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subs[channel]
	if sub == nil {
		return false
	}
	select {
	case <-sub.ready:
		return true
	default:
		return false
	}
}

// receive is node i's subscription goroutine. A broken connection is
// dialled again (the client subscribes its channels again) after a pause
// that doubles up to a second while the node stays out of reach.
func (n *notifier) receive(i int, ps *redis.PubSub) {
	defer n.running.Done()
	swept := time.Now()
	pause := time.Duration(0)
	for {
		m, err := ps.ReceiveTimeout(n.closing, healthCheck)
		switch {
		case err == nil:
			pause = 0
			n.deliver(i, m)
		case errors.Is(err, redis.ErrClosed) || n.closing.Err() != nil:
			return
		case redisnode.IsTimeout(err):
			ps.Ping(n.closing)
		default:
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			select {
			case <-time.After(pause):
			case <-n.quit:
				return
			}
		}
		if now := time.Now(); now.Sub(swept) >= idleChannel {
			n.unsubscribeIdle(ps, now)
			swept = now
		}
	}
}

func (n *notifier) deliver(i int, m any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := m.(type) {
	case *redis.Subscription:
		sub := n.subs[m.Channel]
		if sub == nil || m.Kind != "ssubscribe" {
			return
		}
		if !sub.confirmed[i] {
			sub.confirmed[i] = true
			close(sub.changed)
			sub.changed = make(chan struct{})
		}
		for _, c := range sub.confirmed {
			if !c {
				return
			}
		}
		select {
		case <-sub.ready:
		default:
			close(sub.ready)
		}
	case *redis.Message:
		token, g := redisnode.ParseGrant(m.Payload)
		sub := n.subs[m.Channel]
		if sub == nil {
			return
		}
		if token == "" { // a broadcast: a watched lock changed hands
			for _, wake := range sub.waiters {
				send(wake, grant{node: i, Grant: g})
			}
		} else if wake := sub.waiters[token]; wake != nil {
			send(wake, grant{node: i, Grant: g})
		}
	}
}

// send hands g to a waiter's channel without blocking: when the channel
// is full, the waiter looks again on its own.
func send(wake chan grant, g grant) {
	select {
	case wake <- g:
	default:
	}
}

// start counts a goroutine that stop waits for, unless the notifier has
// stopped; it reports whether it counted one.
func (n *notifier) start() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	n.running.Add(1)
	return true
}

// unsubscribeIdle ends the subscriptions that have had no waiter for
// idleChannel.
func (n *notifier) unsubscribeIdle(ps *redis.PubSub, now time.Time) {
	n.mu.Lock()
	var idle []string
	for ch, sub := range n.subs {
		if len(sub.waiters) == 0 && now.Sub(sub.idle) >= idleChannel {
			idle = append(idle, ch)
			delete(n.subs, ch)
		}
	}
	conns := append([]*redis.PubSub(nil), n.conns...)
	n.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.closing, time.Second)
	defer cancel()
	for _, c := range conns {
		if c != nil {
			c.SUnsubscribe(ctx, idle...)
		}
	}
}

func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	conns := n.conns
	n.conns = nil
	n.mu.Unlock()
	n.cancel()
	close(n.quit)
	for _, ps := range conns {
		if ps != nil {
			ps.Close()
		}
	}
	n.running.Wait()
}
