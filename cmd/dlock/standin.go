package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// startStandIn starts the demo's in-process Redis (miniredis) on a free
// loopback port, for machines without redis-server. why says what became of
// redis-server; the demo prints it.
func startStandIn(why string) (*demoServer, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("%s, and the in-process stand-in did not start: %w", why, err)
	}
	if err := newShardedPubSub().register(m.Server()); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s, and the in-process stand-in did not start: %w", why, err)
	}
	// The stand-in's keys expire only when its clock is moved: move it
	// with the real one.
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return &demoServer{
		addr:  m.Addr(),
		about: fmt.Sprintf("%s: using an in-process Redis stand-in (miniredis) on %s; install redis-server for the real thing", why, m.Addr()),
		stop: func() {
			close(quit)
			wg.Wait()
			m.Close()
		},
	}, nil
}

// shardedPubSub gives the stand-in the sharded pub/sub commands it lacks
// (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH), by which a release wakes its
// waiters. On one server, sharded channels are plain channels of their own
// namespace.
type shardedPubSub struct {
	mu    sync.Mutex
	peers map[string]map[*server.Peer]bool // channel → subscribers
	subs  map[*server.Peer]map[string]bool // subscriber → channels
}

func newShardedPubSub() *shardedPubSub {
	return &shardedPubSub{
		peers: make(map[string]map[*server.Peer]bool),
		subs:  make(map[*server.Peer]map[string]bool),
	}
}

func (ps *shardedPubSub) register(s *server.Server) error {
	for name, cmd := range map[string]server.Cmd{
		"SSUBSCRIBE":   ps.subscribe,
		"SUNSUBSCRIBE": ps.unsubscribe,
		"SPUBLISH":     ps.publish,
	} {
		if err := s.Register(name, cmd); err != nil {
			return err
		}
	}
	return nil
}

func (ps *shardedPubSub) subscribe(c *server.Peer, cmd string, args []string) {
	if len(args) == 0 {
		c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd))
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	chans := ps.subs[c]
	if chans == nil {
		chans = make(map[string]bool)
		ps.subs[c] = chans
		c.OnDisconnect(func() { ps.drop(c) })
	}
	for _, ch := range args {
		chans[ch] = true
		if ps.peers[ch] == nil {
			ps.peers[ch] = make(map[*server.Peer]bool)
		}
		ps.peers[ch][c] = true
		confirm(c, "ssubscribe", ch, len(chans))
	}
}

func (ps *shardedPubSub) unsubscribe(c *server.Peer, _ string, args []string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	chans := ps.subs[c]
	if len(args) == 0 {
		for ch := range chans {
			args = append(args, ch)
		}
	}
	for _, ch := range args {
		delete(chans, ch)
		delete(ps.peers[ch], c)
		if len(ps.peers[ch]) == 0 {
			delete(ps.peers, ch)
		}
		confirm(c, "sunsubscribe", ch, len(chans))
	}
}

func (ps *shardedPubSub) publish(c *server.Peer, cmd string, args []string) {
	if len(args) != 2 {
		c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd))
		return
	}
	ch, msg := args[0], args[1]
	ps.mu.Lock()
	to := make([]*server.Peer, 0, len(ps.peers[ch]))
	for p := range ps.peers[ch] {
		to = append(to, p)
	}
	ps.mu.Unlock()
	for _, p := range to {
		p.Block(func(w *server.Writer) {
			w.WritePushLen(3)
			w.WriteBulk("smessage")
			w.WriteBulk(ch)
			w.WriteBulk(msg)
			w.Flush()
		})
	}
	c.WriteInt(len(to))
}

// drop forgets a subscriber whose connection closed.
func (ps *shardedPubSub) drop(c *server.Peer) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for ch := range ps.subs[c] {
		delete(ps.peers[ch], c)
		if len(ps.peers[ch]) == 0 {
			delete(ps.peers, ch)
		}
	}
	delete(ps.subs, c)
}

// confirm answers a subscription change as Redis does.
func confirm(c *server.Peer, kind, ch string, count int) {
	c.Block(func(w *server.Writer) {
		w.WritePushLen(3)
		w.WriteBulk(kind)
		w.WriteBulk(ch)
		w.WriteInt(count)
	})
}
