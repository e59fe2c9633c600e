package redislock

import (
	"context"
	_ "embed"
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

//go:embed force.lua
var forceLua string

var forceScript = newScript(preludeLua + commonLua + forceLua)

// Inspect reads what Redis holds about key, in one round trip (a MULTI
// block over the lock's keys, which share a Cluster slot). It changes
// nothing.
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	if l.table.Closed() {
		return dlock.Info{}, &dlock.KeyError{Op: "inspect", Key: key, Err: dlock.ErrClosed}
	}
	k, err := keysOf(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	var (
		get     *redis.StringCmd
		pttl    *redis.DurationCmd
		fence   *redis.StringCmd
		holds   *redis.IntCmd
		waiters *redis.IntCmd
	)
	_, err = l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k.lock)
		pttl = p.PTTL(ctx, k.lock)
		fence = p.HGet(ctx, k.meta, "f")
		holds = p.HLen(ctx, k.holds)
		waiters = p.ZCard(ctx, k.queue)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return dlock.Info{}, &dlock.KeyError{Op: "inspect", Key: key, Err: err}
	}
	info := dlock.Info{Key: key, FenceKnown: true, Waiters: int(waiters.Val()), WaitersKnown: true}
	if f := fence.Val(); f != "" {
		if info.Fence, err = strconv.ParseUint(f, 10, 64); err != nil {
			return dlock.Info{}, &dlock.KeyError{Op: "inspect", Key: key, Err: fmt.Errorf("fence counter %q: %w", f, err)}
		}
	}
	if get.Err() == nil {
		fill(&info, get.Val(), pttl.Val(), int(holds.Val()))
	}
	return info, nil
}

// fill records the holder described by the lock key's value and PTTL.
func fill(info *dlock.Info, value string, pttl time.Duration, holds int) {
	info.Held = true
	info.TTL = pttl
	if pttl < 0 { // go-redis reports "no expiry" as -1ns
		info.TTL = -1
	}
	info.Holds = 1
	if owner, ok := strings.CutPrefix(value, "o:"); ok { // a token never has ':'
		info.Owner, info.Holds = owner, holds
	}
}

// List returns the locks held under the Locker's prefix whose key matches
// pattern (Redis glob syntax: *, ?, [abc], \ to escape; "" matches all),
// sorted by key. It walks the keyspace with SCAN, on every master of a
// Cluster, so it never blocks the server as KEYS would; a lock taken or
// released during the walk may or may not be listed.
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	if l.table.Closed() {
		return nil, dlock.ErrClosed
	}
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	keys, err := l.scan(ctx, l.opts.Prefix+":lock:", glob)
	if err != nil {
		return nil, err
	}
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

// ForceUnlock deletes key's lock whoever holds it, with all its holds, and
// hands it to the first live waiter, in one round trip. It is for an
// operator clearing a stuck lock: the holder, if alive, learns at its next
// renewal that the lock is lost (dlock.ErrOwnershipLost). It returns what it
// deleted, or an error matching dlock.ErrNotHeld when the lock was free.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	if l.table.Closed() {
		return dlock.Info{}, &dlock.KeyError{Op: "force unlock", Key: key, Err: dlock.ErrClosed}
	}
	k, err := keysOf(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	res, err := forceScript.run(ctx, l.client, keyArgs(k)).Slice()
	if errors.Is(err, redis.Nil) {
		return dlock.Info{}, &dlock.KeyError{Key: key, Err: dlock.ErrNotHeld}
	}
	if err != nil {
		return dlock.Info{}, &dlock.KeyError{Op: "force unlock", Key: key, Err: err}
	}
	if len(res) != 4 {
		return dlock.Info{}, &dlock.KeyError{Op: "force unlock", Key: key, Err: fmt.Errorf("unexpected reply %v", res)}
	}
	value, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	holds, _ := res[2].(int64)
	fence, _ := res[3].(int64)
	info := dlock.Info{Key: key, Fence: uint64(fence), FenceKnown: true}
	ttl := time.Duration(pttl) * time.Millisecond
	if pttl < 0 {
		ttl = -1
	}
	fill(&info, value, ttl, int(holds))
	return info, nil
}

// scan returns, sorted, the keys that callers name (without head) of the
// keys under head that match glob: on every master of a Cluster.
func (l *Locker) scan(ctx context.Context, head string, glob driver.Pattern) ([]string, error) {
	match := glob.Under(head)
	var (
		mu   sync.Mutex
		seen = make(map[string]bool)
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, 500).Result()
			if err != nil {
				return fmt.Errorf("dlock: list: scan: %w", err)
			}
			mu.Lock()
			for _, k := range keys {
				seen[strings.TrimPrefix(k, head)] = true
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, l.client)
	}
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}
