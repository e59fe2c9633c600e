package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// Inspect reads what the nodes hold about key, one MULTI block per node,
// all at once, and reports the majority's view: the lock is held when a
// majority of the nodes hold it for the same party, for as long as a
// majority still will, with the holder's fence (see majority). It
// changes nothing, and needs a majority of the nodes to answer
// (ErrNoQuorum otherwise).
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	return l.each(ctx, "inspect", key, func(ctx context.Context, nd *node, k *redisnode.Keys) (redisnode.State, error) {
		return redisnode.Read(ctx, nd.client, k)
	})
}

// ForceUnlock deletes key's lock on every node, whoever holds it, and
// hands each node's part to the first live waiter there. It is for an
// operator clearing a stuck lock: the holder, if alive, learns at its next
// renewal that the lock is lost. It returns what the majority held, or an
// error matching dlock.ErrNotHeld when no majority held it.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	now := time.Now().UnixMicro()
	info, err := l.each(ctx, "force unlock", key, func(ctx context.Context, nd *node, k *redisnode.Keys) (redisnode.State, error) {
		res, err := forceScript.Run(ctx, nd.send, k.Args(), now).Slice()
		if errors.Is(err, redis.Nil) {
			return redisnode.State{}, nil
		}
		if err != nil {
			return redisnode.State{}, err
		}
		return redisnode.ForceReply(res)
	})
	if err == nil && !info.Held {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrNotHeld)
	}
	return info, err
}

// each runs do on every node at once for key's lock and returns the view
// of the majority of the states they report (see majority); it needs a
// majority of the nodes to answer.
func (l *Locker) each(ctx context.Context, op, key string, do func(context.Context, *node, *redisnode.Keys) (redisnode.State, error)) (dlock.Info, error) {
	if l.tables.Locks.Closed() || !l.calls.enter() {
		return dlock.Info{}, errClosed(op, key)
	}
	defer l.calls.leave()
	k, err := redisnode.Of(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	var mu sync.Mutex
	states := map[int]redisnode.State{}
	send := func(ctx context.Context, nd *node) reply {
		st, err := do(ctx, nd, &k)
		if err != nil {
			return reply{err: err}
		}
		mu.Lock()
		states[nd.i] = st
		mu.Unlock()
		return reply{}
	}
	got, rd := l.fanout(ctx, l.nodes, l.timeout, send, nil, nil)
	rd.settle(false)
	var errs []error
	for _, r := range got {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) < l.quorum {
		return dlock.Info{}, l.noQuorum(op, key, len(states), errs)
	}
	return l.majority(key, states), nil
}

// majority is the view of a majority of the nodes (states has at least a
// majority's). The waiters are those a majority queues. The fence of a held
// lock is the largest counter among the nodes that hold it: the holder's
// fence, for a majority of the nodes has a counter at that fence (see
// fence), it shares a node with the majority that holds the lock, and a
// node's counter moves while the holder holds its key there only to the
// holder's fence (raise.lua) or for an owner's new hold. (A node that
// granted the acquisition after its majority answered may show more.) A
// node outside them may have moved its counter further for an attempt
// that failed, which is no holder's fence. The fence of a free lock is
// the largest counter of any node: at least every fence handed out.
func (l *Locker) majority(key string, states map[int]redisnode.State) dlock.Info {
	info := dlock.Info{Key: key, FenceKnown: true, WaitersKnown: true}
	byValue := map[string][]redisnode.State{}
	var waiters []int
	for _, st := range states {
		info.Fence = max(info.Fence, st.Fence)
		waiters = append(waiters, st.Waiters)
		if st.Value != "" {
			byValue[st.Value] = append(byValue[st.Value], st)
		}
	}
	// The waiters a majority queues: a waiter on fewer nodes (its attempt
	// still on its way to the others) waits for no grant of a majority.
	slices.Sort(waiters)
	info.Waiters = waiters[len(waiters)-l.quorum]
	for _, sts := range byValue {
		if len(sts) < l.quorum {
			continue
		}
		info.Fence = 0
		for _, st := range sts {
			info.Fence = max(info.Fence, st.Fence)
		}
		// held for as long as a majority still holds it
		slices.SortFunc(sts, func(a, b redisnode.State) int { return int(b.TTL - a.TTL) })
		sts[l.quorum-1].Describe(&info)
	}
	return info
}

// List returns the locks held by a majority under the Locker's prefix
// whose key matches pattern (Redis glob syntax; "" matches all), sorted by
// key. It walks every node's keyspace with SCAN, then inspects each key
// found; a lock taken or released during the walk may or may not be
// listed.
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	if l.tables.Locks.Closed() || !l.calls.enter() {
		return nil, dlock.ErrClosed
	}
	defer l.calls.leave()
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	var names redisnode.Names
	scan := func(ctx context.Context, nd *node) reply {
		return reply{err: names.Scan(ctx, nd.client, l.opts.Prefix+":lock:", glob)}
	}
	got, rd := l.fanout(ctx, l.nodes, max(l.timeout, 10*time.Second), scan, nil, nil)
	rd.settle(false)
	var errs []error
	for _, r := range got {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: scan: %w", l.nodes[r.node].addr, r.err))
		}
	}
	if answered := len(got) - len(errs); answered < l.quorum {
		return nil, fmt.Errorf("dlock: list: %w: %d of %d nodes answered: %w", ErrNoQuorum, answered, len(l.nodes), errorsJoin(errs))
	}
	return redisnode.Held(ctx, names.Sorted(), l.Inspect)
}
