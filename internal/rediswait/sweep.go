package rediswait

import (
	"context"
	"time"
)

// sweep ends the subscriptions that have had no waiter for idleChannel,
// once every idleChannel, on the goroutine of connection c; it reports
// whether that closed c. A waiter that comes for a channel meanwhile
// waits until its unsubscription was sent (see Watch), so that it cannot
// undo the new subscription.
func (s *Subscriber) sweep(c *conn, now time.Time) (closed bool) {
	s.mu.Lock()
	if now.Sub(s.swept) < idleChannel || s.stopped {
		s.mu.Unlock()
		return false
	}
	s.swept = now
	idle := map[*conn][]string{}
	var subs []*subscription
	var channels []string
	for ch, sub := range s.subs {
		if len(sub.waiters) > 0 || now.Sub(sub.idle) < idleChannel {
			continue
		}
		delete(s.subs, ch)
		s.leaving[ch] = make(chan struct{})
		subs, channels = append(subs, sub), append(channels, ch)
		for _, x := range sub.conns {
			if x != nil {
				idle[x] = append(idle[x], ch)
			}
		}
	}
	s.mu.Unlock()
	if len(subs) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(s.closing, max(s.SubscribeTimeout, time.Second))
	defer cancel()
	for x, chs := range idle {
		x.ps.SUnsubscribe(ctx, chs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range subs {
		for i, x := range sub.conns {
			if x != nil {
				sub.conns[i] = nil
				s.leave(x)
			}
		}
	}
	for _, ch := range channels {
		close(s.leaving[ch])
		delete(s.leaving, ch)
	}
	return s.conns[c.target] != c
}
