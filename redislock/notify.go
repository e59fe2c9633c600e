package redislock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier keeps the Locker's one subscription connection and wakes the
// waiter a release names. Channels are sharded (SSUBSCRIBE), as the release
// script publishes with SPUBLISH: in a Cluster a message stays on the shard
// of its key.
type notifier struct {
	client redis.UniversalClient
	log    *slog.Logger

	subscribeTimeout time.Duration // a field so that tests can lengthen it

	drop atomic.Bool // test hook: lose every wake-up

	quit    chan struct{}   // closed by stop
	closing <-chan struct{} // closed when the Locker's Close begins

	mu      sync.Mutex
	ps      *redis.PubSub
	subs    map[string]*subscription // by channel
	stopped bool
	running sync.WaitGroup
}

type subscription struct {
	ready   chan struct{}         // closed when Redis confirmed the subscription
	waiters map[string]chan grant // by token
	idle    time.Time             // when the last waiter left
}

// grant is a wake-up: the lock was handed to the waiter after its attempt
// number attempt, with fence (zero when the waiter did not ask for one).
type grant struct {
	attempt int64
	fence   uint64
}

// parseGrant reads a release's message "<token> <attempt> <fence>".
func parseGrant(payload string) (token string, g grant) {
	token, rest, _ := strings.Cut(payload, " ")
	a, f, _ := strings.Cut(rest, " ")
	g.attempt, _ = strconv.ParseInt(a, 10, 64)
	g.fence, _ = strconv.ParseUint(f, 10, 64)
	return token, g
}

const (
	// subscribeTimeout bounds how long a waiter waits for its subscription
	// before it falls back to its retry timer alone.
	subscribeTimeout = 2 * time.Second
	// healthCheck is how long the subscription connection may stay silent
	// before it is pinged.
	healthCheck = 5 * time.Second
	// idleChannel is how long a channel without waiters stays subscribed, so
	// that a key that is waited on again and again is not re-subscribed.
	idleChannel = 30 * time.Second
)

func newNotifier(client redis.UniversalClient, log *slog.Logger, closing <-chan struct{}) *notifier {
	return &notifier{client: client, log: log, subscribeTimeout: subscribeTimeout, subs: make(map[string]*subscription), quit: make(chan struct{}), closing: closing}
}

// watch registers a waiter for the wake-ups named token on channel, and
// returns once the subscription is confirmed (or could not be within
// subscribeTimeout, ctx ended or the Locker began to close: the waiter then
// relies on its fallback timer, or stops). The
// channel holds the latest wake-up not yet received.
func (n *notifier) watch(ctx context.Context, channel, token string) (<-chan grant, func()) {
	wake := make(chan grant, 1)
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return wake, func() {}
	}
	if n.ps == nil {
		n.ps = n.client.SSubscribe(context.WithoutCancel(ctx))
		n.running.Add(1)
		go n.receive(n.ps)
	}
	sub := n.subs[channel]
	if sub == nil {
		sub = &subscription{ready: make(chan struct{}), waiters: make(map[string]chan grant)}
		n.subs[channel] = sub
		if err := n.ps.SSubscribe(ctx, channel); err != nil {
			n.log.Warn("subscribe failed", "error", err)
		}
	}
	sub.waiters[token] = wake
	n.mu.Unlock()

	unwatch := func() {
		n.mu.Lock()
		delete(sub.waiters, token)
		if len(sub.waiters) == 0 {
			sub.idle = time.Now()
		}
		n.mu.Unlock()
	}
	t := time.NewTimer(n.subscribeTimeout)
	defer t.Stop()
	select {
	case <-sub.ready:
	case <-t.C:
	case <-ctx.Done():
	case <-n.closing:
	}
	return wake, unwatch
}

// ready reports whether channel is subscribed and confirmed, so that a
// waiter may join the queue on its first attempt.
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

// receive is the subscriber's goroutine.
// It reads the connection itself, rather than through the client's
// message channel, so that a wake-up reaches its waiter with one goroutine
// switch fewer. A silent connection is pinged every healthCheck; a broken
// one is re-dialled (the client re-subscribes) after a pause that doubles
// up to a second while the server stays out of reach.
func (n *notifier) receive(ps *redis.PubSub) {
	defer n.running.Done()
	ctx := context.Background()
	swept := time.Now()
	pause := time.Duration(0)
	for {
		m, err := ps.ReceiveTimeout(ctx, healthCheck)
		switch {
		case err == nil:
			pause = 0
			n.deliver(m)
		case errors.Is(err, redis.ErrClosed):
			return
		case isTimeout(err):
			ps.Ping(ctx) // a dead connection fails the next receive
		default:
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			select {
			case <-time.After(pause): // back off while the server is out of reach
			case <-n.quit:
				return
			}
		}
		if now := time.Now(); now.Sub(swept) >= idleChannel {
			n.unsubscribeIdle(now)
			swept = now
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (n *notifier) deliver(m any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := m.(type) {
	case *redis.Subscription:
		if sub := n.subs[m.Channel]; sub != nil && m.Kind == "ssubscribe" {
			select {
			case <-sub.ready:
			default:
				close(sub.ready)
			}
		}
	case *redis.Message:
		if n.drop.Load() {
			return
		}
		token, g := parseGrant(m.Payload)
		if sub := n.subs[m.Channel]; sub != nil {
			if wake := sub.waiters[token]; wake != nil {
				select { // keep only the latest
				case <-wake:
				default:
				}
				wake <- g // cannot block: only this goroutine sends, under n.mu
			}
		}
	}
}

func (n *notifier) unsubscribeIdle(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock() // held while sending, so a new watch cannot slip in between
	var idle []string
	for ch, sub := range n.subs {
		if len(sub.waiters) == 0 && now.Sub(sub.idle) >= idleChannel {
			idle = append(idle, ch)
			delete(n.subs, ch)
		}
	}
	if len(idle) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		n.ps.SUnsubscribe(ctx, idle...)
	}
}

func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	ps := n.ps
	n.mu.Unlock()
	close(n.quit)
	if ps != nil {
		ps.Close()
	}
	n.running.Wait()
}
