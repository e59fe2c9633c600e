package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// nodeInfo is what one node holds about a lock.
type nodeInfo struct {
	value   string // "" when free
	pttl    time.Duration
	holds   int
	fence   uint64
	waiters int
}

// Inspect reads what the nodes hold about key, one MULTI block per node,
// all at once, and reports the majority's view: the lock is held when a
// majority of the nodes hold it for the same party, for as long as a
// majority still will; its fence is the largest a node holds, which is
// the latest acquisition's unless an attempt that failed moved some
// nodes' counters further. It
// changes nothing, and needs a majority of the nodes to answer
// (ErrNoQuorum otherwise).
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	if l.table.Closed() {
		return dlock.Info{}, &dlock.KeyError{Op: "inspect", Key: key, Err: dlock.ErrClosed}
	}
	k, err := keysOf(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	var mu sync.Mutex
	infos := map[int]nodeInfo{}
	send := func(ctx context.Context, nd *node) reply {
		var (
			get     *redis.StringCmd
			pttl    *redis.DurationCmd
			fence   *redis.StringCmd
			holds   *redis.IntCmd
			waiters *redis.IntCmd
		)
		_, err := nd.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, k.lock)
			pttl = p.PTTL(ctx, k.lock)
			fence = p.HGet(ctx, k.meta, "f")
			holds = p.HLen(ctx, k.holds)
			waiters = p.ZCard(ctx, k.queue)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return reply{err: err}
		}
		info := nodeInfo{value: get.Val(), pttl: pttl.Val(), holds: int(holds.Val()), waiters: int(waiters.Val())}
		if f := fence.Val(); f != "" {
			if info.fence, err = strconv.ParseUint(f, 10, 64); err != nil {
				return reply{err: fmt.Errorf("fence counter %q: %w", f, err)}
			}
		}
		mu.Lock()
		infos[nd.i] = info
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
	if len(infos) < l.quorum {
		return dlock.Info{}, l.noQuorum("inspect", key, len(infos), errs)
	}
	return l.majority(key, infos), nil
}

// majority is the view of a majority of the nodes.
func (l *Locker) majority(key string, infos map[int]nodeInfo) dlock.Info {
	info := dlock.Info{Key: key, FenceKnown: true, WaitersKnown: true}
	byValue := map[string][]nodeInfo{}
	fences := make([]uint64, 0, len(infos))
	for _, ni := range infos {
		fences = append(fences, ni.fence)
		info.Waiters = max(info.Waiters, ni.waiters)
		if ni.value != "" {
			byValue[ni.value] = append(byValue[ni.value], ni)
		}
	}
	// The largest fence a node holds: at least the latest acquisition's,
	// for a majority holds that one (see fence), and any majority of
	// answers includes one of them.
	info.Fence = slices.Max(fences)
	for value, nis := range byValue {
		if len(nis) < l.quorum {
			continue
		}
		slices.SortFunc(nis, func(a, b nodeInfo) int { return int(b.pttl - a.pttl) })
		ni := nis[l.quorum-1]
		info.Held, info.TTL, info.Holds = true, ni.pttl, 1
		if ni.pttl < 0 {
			info.TTL = -1
		}
		if owner, ok := strings.CutPrefix(value, "o:"); ok {
			info.Owner, info.Holds = owner, ni.holds
		}
	}
	return info
}

// List returns the locks held by a majority under the Locker's prefix
// whose key matches pattern (Redis glob syntax; "" matches all), sorted by
// key. It walks every node's keyspace with SCAN, then inspects each key
// found; a lock taken or released during the walk may or may not be
// listed.
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	if l.table.Closed() {
		return nil, dlock.ErrClosed
	}
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	head := l.opts.Prefix + ":lock:"
	match := glob.Under(head)
	var mu sync.Mutex
	seen := map[string]bool{}
	scan := func(ctx context.Context, nd *node) reply {
		var cursor uint64
		for {
			keys, next, err := nd.client.Scan(ctx, cursor, match, 500).Result()
			if err != nil {
				return reply{err: err}
			}
			mu.Lock()
			for _, k := range keys {
				seen[strings.TrimPrefix(k, head)] = true
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return reply{}
			}
		}
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
	mu.Lock()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	mu.Unlock()
	slices.Sort(keys)
	infos := make([]dlock.Info, 0, len(keys))
	for _, k := range keys {
		info, err := l.Inspect(ctx, k)
		if errors.Is(err, dlock.ErrInvalidKey) {
			continue // written by another program in our namespace
		}
		if err != nil {
			return nil, err
		}
		if info.Held {
			infos = append(infos, info)
		}
	}
	return infos, nil
}

// ForceUnlock deletes key's lock on every node, whoever holds it, and
// hands each node's part to the first live waiter there. It is for an
// operator clearing a stuck lock: the holder, if alive, learns at its next
// renewal that the lock is lost. It returns what the majority held, or an
// error matching dlock.ErrNotHeld when no majority held it.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	if l.table.Closed() {
		return dlock.Info{}, &dlock.KeyError{Op: "force unlock", Key: key, Err: dlock.ErrClosed}
	}
	k, err := keysOf(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	var mu sync.Mutex
	infos := map[int]nodeInfo{}
	now := time.Now().UnixMicro()
	send := func(ctx context.Context, nd *node) reply {
		res, err := forceScript.run(ctx, nd.client, k.args, now).Slice()
		if errors.Is(err, redis.Nil) {
			mu.Lock()
			infos[nd.i] = nodeInfo{}
			mu.Unlock()
			return reply{}
		}
		if err != nil {
			return reply{err: err}
		}
		if len(res) != 4 {
			return reply{err: fmt.Errorf("unexpected reply %v", res)}
		}
		value, _ := res[0].(string)
		pttl, _ := res[1].(int64)
		holds, _ := res[2].(int64)
		fence, _ := res[3].(int64)
		mu.Lock()
		infos[nd.i] = nodeInfo{value: value, pttl: time.Duration(pttl) * time.Millisecond, holds: int(holds), fence: uint64(fence)}
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
	if len(infos) < l.quorum {
		return dlock.Info{}, l.noQuorum("force unlock", key, len(infos), errs)
	}
	info := l.majority(key, infos)
	if !info.Held {
		return dlock.Info{}, &dlock.KeyError{Key: key, Err: dlock.ErrNotHeld}
	}
	return info, nil
}
