package rediswait

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// receive is the goroutine of connection c. It reads the connection
// itself, rather than through the client's message channel, so that a
// message reaches its waiter with one goroutine switch fewer. A silent
// connection is pinged every healthCheck; a broken one is re-dialled (the
// client subscribes its channels again) after a pause that doubles up to
// a second while the server stays out of reach. A subscription that the
// server refuses because its slot lives elsewhere (MOVED), or ends
// because its slot moved away, moves to the target that serves the slot
// now. Every idleChannel, one of the connections' goroutines ends the
// subscriptions that have had no waiter as long.
func (s *Subscriber) receive(c *conn) {
	defer s.running.Done()
	ctx := s.closing // so that Close ends a dial in progress
	pause := time.Duration(0)
	for {
		m, err := c.ps.ReceiveTimeout(ctx, healthCheck)
		var moved redis.Error
		switch {
		case err == nil:
			pause = 0
			s.deliver(c, m)
		case errors.Is(err, redis.ErrClosed) || ctx.Err() != nil:
			return
		case redisnode.IsTimeout(err):
			c.ps.Ping(ctx) // a dead connection fails the next receive
		case errors.As(err, &moved) && movedSlot(moved.Error()) >= 0:
			s.movedAway(c, movedSlot(moved.Error()))
		default:
			if s.cfg.Reload != nil {
				s.cfg.Reload(ctx) // the master may have failed over
			}
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			select {
			case <-time.After(pause): // back off while the server is out of reach
			case <-s.quit:
				return
			}
		}
		if s.sweep(c, time.Now()) {
			return // c closed: nothing is subscribed on it
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
	n, err := strconv.Atoi(strings.SplitN(rest, " ", 2)[0])
	if err != nil {
		return -1
	}
	return n
}

// deliver hands m, read on c, to its waiters, or records the
// confirmation or the end of a subscription.
func (s *Subscriber) deliver(c *conn, m any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := m.(type) {
	case *redis.Subscription:
		sub := s.subs[m.Channel]
		if sub == nil {
			return
		}
		i := sub.target(c)
		if i < 0 {
			return // a reply to a change made since
		}
		switch m.Kind {
		case "ssubscribe":
			sub.moves[i] = 0
			if !sub.confirmed[i] {
				sub.confirmed[i] = true
				close(sub.changed)
				sub.changed = make(chan struct{})
			}
			if !slicesContains(sub.confirmed, false) {
				closeOnce(sub.ready)
			}
		case "sunsubscribe": // not asked for: the channel's slot moved away
			s.move(m.Channel, sub, i)
		}
	case *redis.Message:
		if s.Drop.Load() {
			return
		}
		sub := s.subs[m.Channel]
		if sub == nil {
			return
		}
		token, g := redisnode.ParseGrant(m.Payload)
		w := Wake{Node: max(sub.target(c), 0), Grant: g}
		if token == "" { // a broadcast: a watched lock changed hands
			for _, wake := range sub.waiters {
				send(wake, w)
			}
		} else if wake := sub.waiters[token]; wake != nil {
			send(wake, w)
		}
	}
}

// target is the place of c among sub's targets, or -1.
func (sub *subscription) target(c *conn) int {
	for i, x := range sub.conns {
		if x == c {
			return i
		}
	}
	return -1
}

// send hands w to a waiter's channel, dropping the oldest message when it
// is full. It cannot block: every sender holds s.mu.
func send(wake chan Wake, w Wake) {
	if len(wake) == cap(wake) {
		select {
		case <-wake:
		default:
		}
	}
	wake <- w
}

// movedAway moves the subscriptions on c in slot n that it has not
// confirmed: the server refused them as another shard's.
func (s *Subscriber) movedAway(c *conn, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, sub := range s.subs {
		if i := sub.target(c); i >= 0 && !sub.confirmed[i] && int(redisnode.Slot(ch)) == n {
			s.move(ch, sub, i)
		}
	}
}
