package redislock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// notifier keeps the Locker's subscriptions and wakes the waiter a release
// names. Channels are sharded (SSUBSCRIBE), as the release script publishes
// with SPUBLISH: in a Cluster a message stays on the shard of its key, so
// the notifier keeps one subscription connection per shard it waits on,
// opened when a waiter first needs it and closed when its channels go idle.
// On one server (Sentinel's included) there is one shard.
type notifier struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // nil on one server
	log     *slog.Logger

	subscribeTimeout time.Duration // a field so that tests can lengthen it
	drop             atomic.Bool   // test hook: lose every wake-up

	quit      chan struct{}   // closed by stop
	closing   context.Context // ended by interrupt, when the Locker's Close begins
	interrupt context.CancelFunc

	mu      sync.Mutex
	shards  map[string]*shard        // by the address of its master; "" on one server
	subs    map[string]*subscription // by channel
	stopped bool
	running sync.WaitGroup
}

// shard is one subscription connection, to the master of some slots.
type shard struct {
	addr string
	ps   *redis.PubSub
	subs int // the subscriptions on it
}

type subscription struct {
	shard     *shard                // nil while it is being moved to another shard
	confirmed bool                  // Redis confirmed it on shard
	ready     chan struct{}         // closed when Redis first confirmed it
	waiters   map[string]chan grant // by token
	idle      time.Time             // when the last waiter left
	moves     int                   // times it was moved since it was last confirmed
}

// grant is a wake-up (see redisnode.Grant).
type grant = redisnode.Grant

const (
	// subscribeTimeout bounds how long a waiter waits for its subscription
	// before it falls back to its retry timer alone.
	subscribeTimeout = 2 * time.Second
	// healthCheck is how long a subscription connection may stay silent
	// before it is pinged.
	healthCheck = 5 * time.Second
	// idleChannel is how long a channel without waiters stays subscribed, so
	// that a key that is waited on again and again is not re-subscribed.
	idleChannel = 30 * time.Second
)

func newNotifier(client redis.UniversalClient, log *slog.Logger) *notifier {
	cc, _ := client.(*redis.ClusterClient)
	closing, interrupt := context.WithCancel(context.Background())
	return &notifier{
		client: client, cluster: cc, log: log, subscribeTimeout: subscribeTimeout,
		shards: make(map[string]*shard), subs: make(map[string]*subscription),
		quit: make(chan struct{}), closing: closing, interrupt: interrupt,
	}
}

// watch registers a waiter for the wake-ups named token on channel, and
// returns once the subscription is confirmed, or could not be by the
// earlier of subscribeTimeout and by (when not zero), or ctx ended, or the
// Locker began to close: the waiter then relies on its fallback timer, or
// stops. The channel holds the latest wake-up not yet received.
func (n *notifier) watch(ctx context.Context, channel, token string, by time.Time) (<-chan grant, func()) {
	wake := make(chan grant, 1)
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return wake, func() {}
	}
	sub := n.subs[channel]
	fresh := sub == nil
	if fresh {
		sub = &subscription{ready: make(chan struct{}), waiters: make(map[string]chan grant)}
		n.subs[channel] = sub
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
	select {
	case <-sub.ready: // a hot key: nothing to wait for
		return wake, unwatch
	default:
	}
	timeout := n.subscribeTimeout
	if !by.IsZero() {
		timeout = min(timeout, time.Until(by))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(n.closing, cancel)()
	if fresh {
		n.subscribe(ctx, channel, sub)
	}
	select {
	case <-sub.ready:
	case <-ctx.Done():
	}
	return wake, unwatch
}

// subscribe sends the subscription of sub to channel on its shard: the one
// of the master that serves the channel's slot, opened if need be.
func (n *notifier) subscribe(ctx context.Context, channel string, sub *subscription) {
	addr := ""
	if n.cluster != nil {
		node, err := n.cluster.MasterForKey(ctx, channel)
		if err != nil {
			n.log.WarnContext(ctx, "subscribe failed", "channel", channel, "error", err)
			n.mu.Lock()
			if n.subs[channel] == sub && sub.shard == nil {
				delete(n.subs, channel) // the next waiter tries again
			}
			n.mu.Unlock()
			return
		}
		addr = node.Options().Addr
	}
	n.mu.Lock()
	if n.stopped || n.subs[channel] != sub {
		n.mu.Unlock()
		return
	}
	sh := n.shards[addr]
	opened := sh == nil
	if opened {
		sh = &shard{addr: addr, ps: n.client.SSubscribe(context.WithoutCancel(ctx))}
		n.shards[addr] = sh
		n.running.Add(1) // for its receive goroutine, started below
	}
	sh.subs++
	sub.shard = sh
	n.mu.Unlock()
	// Sent outside n.mu: it may dial, for as long as ctx lets it.
	if err := sh.ps.SSubscribe(ctx, channel); err != nil {
		n.log.WarnContext(ctx, "subscribe failed", "channel", channel, "error", err)
	}
	if opened {
		// Only now: a Cluster client dials a subscription connection
		// without channels to a random node, and the first channel, even
		// if its subscription failed, routes every reconnection.
		go n.receive(sh)
	}
}

// leave takes one subscription off sh, and closes sh when none is left: a
// connection without channels would be re-dialled to a random node. The
// caller holds n.mu.
func (n *notifier) leave(sh *shard) {
	if sh.subs--; sh.subs > 0 {
		return
	}
	if n.shards[sh.addr] == sh {
		delete(n.shards, sh.addr)
	}
	n.running.Add(1)
	go func() { // not under n.mu: Close waits for a dial in progress
		defer n.running.Done()
		sh.ps.Close()
	}()
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

// receive is a shard's goroutine. It reads the connection itself, rather
// than through the client's message channel, so that a wake-up reaches its
// waiter with one goroutine switch fewer. A silent connection is pinged
// every healthCheck; a broken one is re-dialled (the client re-subscribes)
// after a pause that doubles up to a second while the server stays out of
// reach. A subscription that the server refuses because its slot lives
// elsewhere (MOVED), or ends because its slot moved away, moves to the
// shard that serves the slot now.
func (n *notifier) receive(sh *shard) {
	defer n.running.Done()
	ctx := n.closing // so that Close ends a dial in progress
	swept := time.Now()
	pause := time.Duration(0)
	for {
		m, err := sh.ps.ReceiveTimeout(ctx, healthCheck)
		var moved redis.Error
		switch {
		case err == nil:
			pause = 0
			n.deliver(sh, m)
		case errors.Is(err, redis.ErrClosed) || ctx.Err() != nil:
			return
		case redisnode.IsTimeout(err):
			sh.ps.Ping(ctx) // a dead connection fails the next receive
		case errors.As(err, &moved) && movedSlot(moved.Error()) >= 0:
			n.movedAway(sh, movedSlot(moved.Error()))
		default:
			if n.cluster != nil {
				n.cluster.ReloadState(ctx) // the master may have failed over
			}
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			select {
			case <-time.After(pause): // back off while the server is out of reach
			case <-n.quit:
				return
			}
		}
		if now := time.Now(); now.Sub(swept) >= idleChannel {
			if n.unsubscribeIdle(sh, now) {
				return // the shard closed: nothing is subscribed on it
			}
			swept = now
		}
	}
}

// movedSlot reads the slot of a "MOVED slot addr" or "ASK slot addr" error,
// or says -1.
func movedSlot(msg string) int {
	kind, rest, _ := strings.Cut(msg, " ")
	if kind != "MOVED" && kind != "ASK" {
		return -1
	}
	s, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func (n *notifier) deliver(sh *shard, m any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := m.(type) {
	case *redis.Subscription:
		sub := n.subs[m.Channel]
		if sub == nil || sub.shard != sh {
			return // a reply to a change made since
		}
		switch m.Kind {
		case "ssubscribe":
			sub.moves, sub.confirmed = 0, true
			select {
			case <-sub.ready:
			default:
				close(sub.ready)
			}
		case "sunsubscribe": // not asked for: the channel's slot moved away
			n.move(m.Channel, sub)
		}
	case *redis.Message:
		if n.drop.Load() {
			return
		}
		token, g := redisnode.ParseGrant(m.Payload)
		if sub := n.subs[m.Channel]; sub != nil {
			if token == "" { // a broadcast: a watched lock changed hands
				for _, wake := range sub.waiters {
					wakeUp(wake, g)
				}
			} else if wake := sub.waiters[token]; wake != nil {
				wakeUp(wake, g)
			}
		}
	}
}

// wakeUp hands g to a waiter's channel, keeping only the latest wake-up.
// It cannot block: every sender holds n.mu.
func wakeUp(wake chan grant, g grant) {
	select {
	case <-wake:
	default:
	}
	wake <- g
}

// movedAway moves the subscriptions of sh in slot s that it has not
// confirmed: the server refused them as another shard's.
func (n *notifier) movedAway(sh *shard, s int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch, sub := range n.subs {
		if sub.shard == sh && !sub.confirmed && int(redisnode.Slot(ch)) == s {
			n.move(ch, sub)
		}
	}
}

// move takes the subscription of channel off its shard and, after a pause
// that grows with each move, subscribes it again where the cluster says its
// slot lives now; a subscription nobody waits on is dropped instead. The
// caller holds n.mu.
func (n *notifier) move(channel string, sub *subscription) {
	sh := sub.shard
	if sh == nil {
		return // already moving
	}
	sub.shard, sub.confirmed = nil, false
	n.leave(sh)
	if len(sub.waiters) == 0 {
		delete(n.subs, channel)
	}
	sub.moves++
	pause := min(10*time.Millisecond<<min(sub.moves, 7), time.Second)
	n.running.Add(1)
	go func() {
		defer n.running.Done()
		ctx, cancel := context.WithTimeout(n.closing, n.subscribeTimeout)
		defer cancel()
		// Out of the client's set, so that a reconnection does not take it
		// back to the old shard.
		sh.ps.SUnsubscribe(ctx, channel)
		if n.cluster != nil {
			n.cluster.ReloadState(ctx)
		}
		select {
		case <-time.After(pause):
		case <-n.quit:
			return
		}
		n.subscribe(ctx, channel, sub)
	}()
}

// unsubscribeIdle ends the subscriptions of sh that have had no waiter for
// idleChannel; it says whether that closed sh.
func (n *notifier) unsubscribeIdle(sh *shard, now time.Time) (closed bool) {
	n.mu.Lock()
	defer n.mu.Unlock() // held while sending, so a new watch cannot slip in between
	var idle []string
	for ch, sub := range n.subs {
		if sub.shard == sh && len(sub.waiters) == 0 && now.Sub(sub.idle) >= idleChannel {
			idle = append(idle, ch)
			delete(n.subs, ch)
			n.leave(sh)
		}
	}
	if sh.subs == 0 {
		return true // leave closed it
	}
	if len(idle) > 0 {
		ctx, cancel := context.WithTimeout(n.closing, n.subscribeTimeout)
		defer cancel()
		sh.ps.SUnsubscribe(ctx, idle...)
	}
	return false
}

func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	shards := n.shards
	n.shards = nil
	n.mu.Unlock()
	n.interrupt()
	close(n.quit)
	for _, sh := range shards {
		sh.ps.Close()
	}
	n.running.Wait()
}
