package rediswait

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// A Subscriber keeps a Locker's subscriptions and hands each message to
// the waiters it names. Channels are sharded (SSUBSCRIBE), as the scripts
// publish with SPUBLISH. A channel is subscribed on each of its targets:
// the one server, or the master of its Cluster shard, or every node of a
// Redlock. Each target has one connection, shared by all the channels
// subscribed there, opened when a waiter first needs it and closed when
// its channels go idle; each open connection has one goroutine that reads
// it. Stop ends them all.
type Subscriber struct {
	cfg Config

	// SubscribeTimeout bounds how long a waiter waits for its subscription
	// before it relies on its fallback timer alone; zero: only the
	// waiter's own bound. A field so that tests can lengthen it.
	SubscribeTimeout time.Duration
	// Drop, when set, loses every message: a test hook.
	Drop atomic.Bool

	quit      chan struct{}   // closed by Stop
	closing   context.Context // ended by Interrupt, when the Locker's Close begins
	interrupt context.CancelFunc

	mu      sync.Mutex
	conns   map[string]*conn         // by target
	subs    map[string]*subscription // by channel
	leaving map[string]chan struct{} // channels being unsubscribed: closed when done
	swept   time.Time                // when idle channels were last looked for
	stopped bool
	running sync.WaitGroup
}

// Config is what a Subscriber needs of its driver.
type Config struct {
	// Route returns the targets of channel, where it is published: one
	// for a Redis server or Cluster, every node for a Redlock. Each call
	// returns as many, in the same order: a Wake names its target by its
	// place there.
	Route func(ctx context.Context, channel string) ([]string, error)
	// Targets is how many targets Route returns.
	Targets int
	// Dial returns a subscription connection without channels to target.
	Dial func(ctx context.Context, target string) *redis.PubSub
	// Reload, when not nil, has the client learn again where the slots
	// live: after a connection failed, or a channel's slot moved.
	Reload func(ctx context.Context)
	// Log receives the failures of subscriptions.
	Log *slog.Logger
}

// Wake is a message to a waiter: a grant (see redisnode.Grant) made on
// the target Node of its channel, or, for a broadcast, a change of the
// lock, with a zero Grant.
type Wake struct {
	Node int
	redisnode.Grant
}

// conn is the subscription connection of one target.
type conn struct {
	target string
	ps     *redis.PubSub
	subs   int // the subscriptions on it
}

// subscription is a channel's, with one link per target.
type subscription struct {
	conns     []*conn              // by target; nil while it is not subscribed there
	confirmed []bool               // by target: Redis confirmed it on conns[i]
	moves     []int                // by target: moves since it was last confirmed
	changed   chan struct{}        // closed, and made again, when a target confirms
	ready     chan struct{}        // closed once every target confirmed, or the first wait for them ended with some
	waiters   map[string]chan Wake // by token
	idle      time.Time            // when the last waiter left
}

const (
	// healthCheck is how long a subscription connection may stay silent
	// before it is pinged.
	healthCheck = 5 * time.Second
	// idleChannel is how long a channel without waiters stays subscribed,
	// so that a key that is waited on again and again is not
	// re-subscribed.
	idleChannel = 30 * time.Second
)

// New returns a Subscriber; it starts no goroutine until a waiter needs a
// connection.
func New(cfg Config, subscribeTimeout time.Duration) *Subscriber {
	closing, interrupt := context.WithCancel(context.Background())
	return &Subscriber{
		cfg: cfg, SubscribeTimeout: subscribeTimeout,
		quit: make(chan struct{}), closing: closing, interrupt: interrupt,
		conns: make(map[string]*conn), subs: make(map[string]*subscription),
		leaving: make(map[string]chan struct{}), swept: time.Now(),
	}
}

// Watch registers a waiter for the messages to token on channel (and the
// broadcasts), and returns once every target confirmed the subscription,
// or, when enough is not nil, once enough says that the targets that
// confirmed (by target) are enough; or once it could not be by the
// earlier of SubscribeTimeout and by (when not zero), or ctx ended, or
// the Locker began to close: the waiter then relies on its fallback timer
// for the targets that did not confirm. The channel holds the latest
// messages not yet received, one per target. unwatch ends the waiter's
// registration.
func (s *Subscriber) Watch(ctx context.Context, channel, token string, by time.Time, enough func(confirmed []bool) bool) (wake <-chan Wake, unwatch func()) {
	w := make(chan Wake, s.cfg.Targets)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return w, func() {}
	}
	sub, fresh, gone := s.join(channel, token, w)
	s.mu.Unlock()
	unwatch = func() {
		s.mu.Lock()
		delete(sub.waiters, token)
		if len(sub.waiters) == 0 {
			sub.idle = time.Now()
		}
		s.mu.Unlock()
	}
	select {
	case <-sub.ready: // a hot key: nothing to wait for
		return w, unwatch
	default:
	}
	timeout := s.SubscribeTimeout
	if timeout <= 0 {
		timeout = time.Until(by)
	} else if !by.IsZero() {
		timeout = min(timeout, time.Until(by))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	if gone != nil { // the channel's unsubscription is under way: it goes first
		select {
		case <-gone:
		case <-ctx.Done():
		}
	}
	if fresh {
		s.subscribe(ctx, channel, sub, enough == nil)
	}
	for enough != nil {
		s.mu.Lock()
		ok, changed := enough(sub.confirmed), sub.changed
		s.mu.Unlock()
		if ok {
			return w, unwatch
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
		}
		break
	}
	select {
	case <-sub.ready:
	case <-ctx.Done():
		if fresh { // a target that did not confirm in time holds up no later waiter
			s.mu.Lock()
			if slicesContains(sub.confirmed, true) {
				closeOnce(sub.ready)
			}
			s.mu.Unlock()
		}
	}
	return w, unwatch
}

// join registers the waiter w of token on channel, and returns its
// subscription, whether it is new (the caller subscribes it), and, when
// the channel is being unsubscribed, a channel closed when that is done.
// The caller holds s.mu.
func (s *Subscriber) join(channel, token string, w chan Wake) (sub *subscription, fresh bool, gone chan struct{}) {
	sub = s.subs[channel]
	if sub == nil {
		n := s.cfg.Targets
		sub = &subscription{
			conns: make([]*conn, n), confirmed: make([]bool, n), moves: make([]int, n),
			changed: make(chan struct{}), ready: make(chan struct{}), waiters: make(map[string]chan Wake),
		}
		s.subs[channel] = sub
		fresh = true
	}
	sub.waiters[token] = w
	return sub, fresh, s.leaving[channel]
}

// Ready reports whether channel is subscribed and confirmed, so that a
// waiter may join the queue with its first attempt.
func (s *Subscriber) Ready(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subs[channel]
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

// Start counts a goroutine that Stop waits for, unless the Subscriber
// has stopped; it reports whether it counted one. The goroutine calls
// Done when it returns.
func (s *Subscriber) Start() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.running.Add(1)
	return true
}

// Done ends a goroutine that Start counted.
func (s *Subscriber) Done() { s.running.Done() }

// Closing is ended when the Locker's Close begins (see Interrupt).
func (s *Subscriber) Closing() context.Context { return s.closing }

// Interrupt ends every wait for a subscription, and the dials under way:
// the first step of the Locker's Close.
func (s *Subscriber) Interrupt() { s.interrupt() }

// Stop closes the connections and waits for every goroutine of the
// Subscriber, and those that Start counted.
func (s *Subscriber) Stop() {
	s.mu.Lock()
	s.stopped = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.interrupt()
	close(s.quit)
	for _, c := range conns {
		c.ps.Close()
	}
	s.running.Wait()
}

// sent counts the targets that sub is subscribed on, or being subscribed.
func (sub *subscription) sent() int {
	n := 0
	for _, c := range sub.conns {
		if c != nil {
			n++
		}
	}
	return n
}

// closeOnce closes c unless it is closed already; the caller holds the
// lock that guards c.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func slicesContains(s []bool, v bool) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
