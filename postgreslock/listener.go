package postgreslock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listener is a Locker's one LISTEN session, on a channel of its own
// (channelOf). A release sends a NOTIFY there naming the waiter it wakes
// ("<waiter> <name>"), or grants the lock ("<waiter>=<fence> <name>"), or
// "* <name>" for the watchers of a name; the
// listener passes it on. It
// connects on first use and again after the connection breaks; each
// (re)connection wakes everyone, since notifications sent meanwhile are
// lost.
//
// Every NOTIFY of the database wakes every session that LISTENs on it,
// whatever its channel, so a session with nobody to tell for ln.idle
// stops listening (UNLISTEN), and keeps its connection: it is quiet. It
// listens again once a waiter needs it (need) or a watch starts, and
// then wakes everyone, as a reconnection does. Waiters register only
// while it listens (isUp), and it stops only while none is there, so no
// registration is in the table while LISTEN is not in force.
type listener struct {
	l   *Locker
	cfg *pgx.ConnConfig

	mu       sync.Mutex
	started  bool
	stopped  bool
	up       bool
	waiters  map[string]chan wake
	watchers map[string]map[chan struct{}]struct{}
	ready    []chan struct{} // told once the session is up
	cancel   context.CancelFunc
	done     chan struct{}
	// wanted: a waiter needs the quiet session to listen again. nudge,
	// when set, ends the quiet session's wait for its next message.
	wanted    bool
	nudge     context.CancelFunc
	idleSince time.Time // when the last waiter or watcher left

	ping     time.Duration // see listenPing
	idle     time.Duration // see listenIdle
	sessions atomic.Int64  // set up so far

	beforeQuiet func() // a test's hook, nil outside tests: run once the session decided to stop listening
}

// wake is what a waiter's channel receives: named when a release named
// it, with the fence of the hold the release granted it (0: none, only
// woken); neither after a (re)connection, when any notification may have
// been missed.
type wake struct {
	named bool
	fence uint64
}

// listenPing is how long the LISTEN session may stay silent before it is
// pinged, and how long the ping may take: a connection that went silent
// without closing is found and replaced within twice that.
const listenPing = 5 * time.Second

// listenIdle is how long the LISTEN session listens with no waiter and no
// watcher before it stops (see listener).
const listenIdle = 5 * time.Second

func newListener(l *Locker, cfg *pgx.ConnConfig) *listener {
	return &listener{l: l, cfg: cfg, ping: listenPing, idle: listenIdle, waiters: map[string]chan wake{}, watchers: map[string]map[chan struct{}]struct{}{}}
}

func send(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// start starts the session's goroutine, once. Called with ln.mu held.
func (ln *listener) start() {
	if ln.started || ln.stopped {
		return
	}
	ln.started = true
	ctx, cancel := context.WithCancel(context.Background())
	ln.cancel, ln.done = cancel, make(chan struct{})
	go ln.run(ctx)
}

// wait registers waiter id; its channel receives a wake when a release
// names it (with a fence when it grants it the lock), and an unnamed one
// when the session (re)connects and any notification may have been
// missed. leave unregisters it.
func (ln *listener) wait(id string) (<-chan wake, func()) {
	c := make(chan wake, 1)
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.waiters[id] = c
	ln.start()
	return c, func() {
		ln.mu.Lock()
		delete(ln.waiters, id)
		ln.idled()
		ln.mu.Unlock()
	}
}

// need tells a quiet session that a waiter needs it to listen: the
// waiter's attempts register once it does, and its wake-up (as after a
// reconnection) tells it so.
func (ln *listener) need() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.want()
}

// want is need with ln.mu held.
func (ln *listener) want() {
	if !ln.up {
		ln.wanted = true
		if ln.nudge != nil {
			ln.nudge()
		}
	}
}

// idled notes when the last waiter or watcher left. Called with ln.mu
// held.
func (ln *listener) idled() {
	if len(ln.waiters) == 0 && len(ln.watchers) == 0 {
		ln.idleSince = time.Now()
	}
}

// busy reports whether someone needs the session to listen. Called with
// ln.mu held.
func (ln *listener) busy() bool {
	return ln.wanted || len(ln.waiters) > 0 || len(ln.watchers) > 0 || len(ln.ready) > 0
}

// isUp reports whether the session is up: a NOTIFY sent now reaches it.
func (ln *listener) isUp() bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.up
}

// watch registers c for the changes of name; ready, when not nil, is
// told once the session is up (at once when it is). stop unregisters it.
func (ln *listener) watch(name string, c chan struct{}, ready chan struct{}) func() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	m := ln.watchers[name]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		ln.watchers[name] = m
	}
	m[c] = struct{}{}
	if ready != nil {
		if ln.up {
			send(ready)
		} else {
			ln.ready = append(ln.ready, ready)
		}
	}
	ln.want()
	ln.start()
	return func() {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		delete(m, c)
		if len(m) == 0 && ln.watchers[name] != nil && len(ln.watchers[name]) == 0 {
			delete(ln.watchers, name)
		}
		ln.idled()
	}
}

// stop ends the session and waits for its goroutine.
func (ln *listener) stop() {
	ln.mu.Lock()
	ln.stopped = true
	cancel, done := ln.cancel, ln.done
	ln.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// wakeAll tells every waiter and watcher: after a (re)connection.
func (ln *listener) wakeAll(up bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.up = up
	if up {
		ln.wanted = false
	}
	for _, c := range ln.waiters {
		select {
		case c <- wake{}:
		default:
		}
	}
	for _, m := range ln.watchers {
		for c := range m {
			send(c)
		}
	}
	if up {
		for _, r := range ln.ready {
			send(r)
		}
		ln.ready = nil
	}
}

func (ln *listener) run(ctx context.Context) {
	defer close(ln.done)
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		up, err := ln.session(ctx)
		if up {
			// Notifications may have been missed since: everyone looks.
			// A session that never came up missed none (the waiters
			// poll meanwhile), and waking them at each failed connection
			// would add an attempt per waiter to a server that may be
			// failing connections for the load.
			ln.wakeAll(false)
			backoff = 10 * time.Millisecond
		}
		if ctx.Err() != nil {
			return
		}
		ln.l.opts.Logger.Debug("the LISTEN session ended; connecting again", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// session runs one LISTEN connection until it fails or ctx ends; up
// reports whether it came up.
func (ln *listener) session(ctx context.Context) (up bool, _ error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, ln.cfg)
	if err != nil {
		cancel()
		return false, err
	}
	defer func() {
		c, cl := context.WithTimeout(context.Background(), time.Second)
		conn.Close(c)
		cl()
	}()
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{channelOf(ln.l.id)}.Sanitize())
	cancel()
	if err != nil {
		return false, err
	}
	ln.sessions.Add(1)
	ln.wakeAll(true)
	channel := pgx.Identifier{channelOf(ln.l.id)}.Sanitize()
	heard := time.Now() // the connection's last sign of life
	for {
		if time.Since(heard) >= ln.ping {
			// Silent for ln.ping: a connection that answers no ping
			// within ln.ping is dead, though nothing closed it.
			pctx, cancel := context.WithTimeout(ctx, ln.ping)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("the LISTEN session did not answer a ping within %v: %w", ln.ping, err)
			}
			heard = time.Now()
		}
		ln.mu.Lock()
		switch {
		case ln.up && !ln.busy() && time.Since(ln.idleSince) >= ln.idle:
			// Quiet from now on: no waiter registers (isUp), and none
			// is registered, as none is there.
			ln.up = false
			ln.mu.Unlock()
			if ln.beforeQuiet != nil {
				ln.beforeQuiet()
			}
			if err := ln.exec(ctx, conn, "UNLISTEN "+channel); err != nil {
				return true, err
			}
			heard = time.Now()
			continue
		case !ln.up && ln.busy():
			ln.mu.Unlock()
			if err := ln.exec(ctx, conn, "LISTEN "+channel); err != nil {
				return true, err
			}
			heard = time.Now()
			// Whoever came meanwhile attempts again, now registering,
			// and the watches are in place.
			ln.wakeAll(true)
			continue
		}
		limit := ln.ping - time.Since(heard)
		wctx, nudge := context.WithCancel(ctx)
		switch {
		case !ln.up:
			ln.nudge = nudge
		case ln.busy(): // look again within ln.idle: the last may leave
			limit = min(limit, ln.idle)
		default:
			limit = min(limit, ln.idle-time.Since(ln.idleSince))
		}
		ln.mu.Unlock()
		n, err := ln.next(ctx, wctx, conn, limit)
		ln.mu.Lock()
		ln.nudge = nil
		ln.mu.Unlock()
		nudge()
		if err != nil {
			return true, err
		}
		if n == nil {
			continue
		}
		heard = time.Now()
		who, name, ok := strings.Cut(n.Payload, " ")
		if !ok {
			continue
		}
		w := wake{named: true}
		if id, fence, granted := strings.Cut(who, "="); granted {
			f, err := strconv.ParseUint(fence, 10, 64)
			if err != nil || f == 0 {
				continue
			}
			who, w.fence = id, f
		}
		ln.mu.Lock()
		if who == "*" {
			for c := range ln.watchers[name] {
				send(c)
			}
		} else if c := ln.waiters[who]; c != nil {
			select {
			case old := <-c: // a reconnection's says less; a grant, more
				if old.fence > 0 {
					w = old
				}
			default:
			}
			c <- w
		}
		ln.mu.Unlock()
	}
}

// exec runs sql on the session's connection, within ln.ping.
func (ln *listener) exec(ctx context.Context, conn *pgx.Conn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, ln.ping)
	defer cancel()
	_, err := conn.Exec(ctx, sql)
	return err
}

// next waits up to limit for the next notification on conn; it returns
// none, and no error, when limit passes or wake ends first.
func (ln *listener) next(ctx, wake context.Context, conn *pgx.Conn, limit time.Duration) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(wake, max(limit, 0))
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	switch {
	case err == nil || ctx.Err() != nil:
		return n, err
	case wctx.Err() != nil:
		return nil, nil
	}
	return nil, err
}
