package postgreslock

import (
	"context"
	"errors"
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

	ping     time.Duration // see listenPing
	sessions atomic.Int64  // set up so far
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

func newListener(l *Locker, cfg *pgx.ConnConfig) *listener {
	return &listener{l: l, cfg: cfg, ping: listenPing, waiters: map[string]chan wake{}, watchers: map[string]map[chan struct{}]struct{}{}}
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
		ln.mu.Unlock()
	}
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
	ln.start()
	return func() {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		delete(m, c)
		if len(m) == 0 && ln.watchers[name] != nil && len(ln.watchers[name]) == 0 {
			delete(ln.watchers, name)
		}
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
	for {
		n, err := ln.next(ctx, conn)
		if err != nil {
			return true, err
		}
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

// next waits for the next notification on conn. After ln.ping of
// silence it pings the server, and returns the error of a ping that
// fails or takes longer than ln.ping: the connection is dead, though
// nothing closed it.
func (ln *listener) next(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, ln.ping)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return n, err
		}
		pctx, cancel := context.WithTimeout(ctx, ln.ping)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the LISTEN session did not answer a ping within %v: %w", ln.ping, err)
		}
	}
}
