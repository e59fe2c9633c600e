package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// isRedlockURL reports whether a --redis URL names independent masters
// for Redlock: redis+redlock:// or rediss+redlock://.
func isRedlockURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	form, known := schemeForm(scheme)
	return ok && known && form == formRedlock
}

// redlockBackend is a Redlock Locker over independent masters.
type redlockBackend struct {
	*redlock.Locker
	clients []redis.UniversalClient
}

func (b *redlockBackend) name() string { return "Redlock" }

func (b *redlockBackend) close() {
	b.Locker.Close()
	for _, c := range b.clients {
		c.Close()
	}
}

// parseRedlockURL parses the Redlock form of --redis:
//
//	redis+redlock://[USER:PASSWORD@]HOST:PORT[/DB][?OPTIONS],HOST:PORT,...
//
// The first element is a URL whose user information, database and
// options apply to every node; each further element is HOST:PORT, or a
// redis:// or rediss:// URL of its own. password is used when a URL
// carries none.
func parseRedlockURL(raw, password string) ([]*redis.Options, error) {
	parts := strings.Split(raw, ",")
	base, _, _ := strings.Cut(parts[0], "+redlock://")
	first, err := redis.ParseURL(base + "://" + strings.SplitN(parts[0], "://", 2)[1])
	if err != nil {
		return nil, fmt.Errorf("bad Redis URL %s: %s", redactURL(raw), redactErr(err, raw))
	}
	opts := []*redis.Options{first}
	for _, p := range parts[1:] {
		var o *redis.Options
		if strings.Contains(p, "://") {
			if o, err = redis.ParseURL(p); err != nil {
				return nil, fmt.Errorf("bad Redis URL %s: %s", redactURL(raw), redactErr(err, raw))
			}
		} else {
			addr, err := hostPort(p)
			if err != nil {
				return nil, fmt.Errorf("bad Redis URL %s: node %q: %v", redactURL(raw), p, err)
			}
			c := *first
			o = &c
			o.Addr = addr
		}
		opts = append(opts, o)
	}
	if len(opts) < 3 {
		return nil, fmt.Errorf("bad Redis URL %s: Redlock needs at least 3 independent servers, got %d", redactURL(raw), len(opts))
	}
	for _, o := range opts {
		if o.Password == "" {
			o.Password = password
		}
		o.ContextTimeoutEnabled = true
		if o.DialTimeout <= 0 {
			o.DialTimeout = defaultDialTimeout
		}
	}
	return opts, nil
}

// nodeTimeout is the option that bounds each request to one node of a
// Locker whose clients' options are nodes: a read_timeout in the URL (the
// longest of them, when nodes differ); none when no node sets one, and
// the driver's default bounds it.
func nodeTimeout(nodes []*redis.Options) []dlock.Option {
	var d time.Duration
	for _, o := range nodes {
		d = max(d, o.ReadTimeout) // negative: go-redis's "none", left to the default
	}
	if d == 0 {
		return nil
	}
	return []dlock.Option{redlock.WithNodeTimeout(d)}
}

// openRedlock opens a client per node, and returns the Locker over them
// with the check that a majority of them answers within the dial timeout.
func (b *backendFlags) openRedlock(e *env, name, raw string, opts ...dlock.Option) (backend, func() int, int) {
	nodes, err := parseRedlockURL(raw, e.getenv("DLOCK_REDIS_PASSWORD"))
	if err != nil {
		return nil, nil, usageError(e, name, "%v", err)
	}
	clients := make([]redis.UniversalClient, len(nodes))
	addrs := make([]string, len(nodes))
	for i, o := range nodes {
		clients[i], addrs[i] = redis.NewClient(o), o.Addr
	}
	locker, err := redlock.New(clients, append(append(nodeTimeout(nodes), dlock.WithPrefix(b.prefix)), opts...)...)
	if err != nil {
		for _, c := range clients {
			c.Close()
		}
		return nil, nil, usageError(e, name, "%v", trimDlock(err))
	}
	ping := func() int {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for i, c := range clients {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), nodes[i].DialTimeout)
				defer cancel()
				if err := c.Ping(ctx).Err(); err != nil {
					if ctx.Err() != nil {
						err = fmt.Errorf("no answer within %v", nodes[i].DialTimeout)
					}
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", addrs[i], err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(nodes)-len(errs) < locker.Quorum() {
			msgs := make([]string, len(errs))
			for i, err := range errs {
				msgs[i] = err.Error()
			}
			return refused(e, "Redlock", strings.Join(addrs, ","), redisRefusal(errs[0]), errors.New(strings.Join(msgs, "; "))) // one line
		}
		return 0
	}
	return &redlockBackend{Locker: locker, clients: clients}, ping, 0
}
