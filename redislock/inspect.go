package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

var forceScript = redisnode.NewScript(lockLua + redisnode.ForceLua)

// Inspect reads what Redis holds about key, in one round trip (a MULTI
// block over the lock's keys, which share a Cluster slot). It changes
// nothing.
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	k, err := redisnode.Of(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	st, err := redisnode.Read(ctx, l.client, &k)
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	info := dlock.Info{Key: key, Fence: st.Fence, FenceKnown: true, Waiters: st.Waiters, WaitersKnown: true}
	st.Describe(&info)
	return info, nil
}

// List returns the locks held under the Locker's prefix whose key matches
// pattern (Redis glob syntax: *, ?, [abc], \ to escape; "" matches all),
// sorted by key. It walks the keyspace with SCAN, on every master of a
// Cluster, so it never blocks the server as KEYS would; a lock taken or
// released during the walk may or may not be listed.
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return l.list(ctx, ":lock:", pattern, l.Inspect)
}

// ForceUnlock deletes key's lock whoever holds it, with all its holds, and
// hands it to the first live waiter, in one round trip. It is for an
// operator clearing a stuck lock: the holder, if alive, learns at its next
// renewal that the lock is lost (dlock.ErrOwnershipLost). It returns what it
// deleted, or an error matching dlock.ErrNotHeld when the lock was free.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("force unlock", key, dlock.ErrClosed)
	}
	k, err := redisnode.Of(l.opts.Prefix, key)
	if err != nil {
		return dlock.Info{}, err
	}
	res, err := forceScript.Run(ctx, l.client, k.Args()).Slice()
	if errors.Is(err, redis.Nil) {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrNotHeld)
	}
	var st redisnode.State
	if err == nil {
		st, err = redisnode.ForceReply(res)
	}
	if err != nil {
		return dlock.Info{}, driver.Wrap("force unlock", key, err)
	}
	info := dlock.Info{Key: key, Fence: st.Fence, FenceKnown: true}
	st.Describe(&info)
	return info, nil
}

// list returns what inspect finds of the keys held in namespace ns (see
// redisnode.In) that match pattern: it walks the keyspace with SCAN, on
// every master of a Cluster, then inspects each key found.
func (l *Locker) list(ctx context.Context, ns, pattern string, inspect func(context.Context, string) (dlock.Info, error)) ([]dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return nil, dlock.ErrClosed
	}
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	var names redisnode.Names
	scan := func(ctx context.Context, c redis.Cmdable) error {
		if err := names.Scan(ctx, c, l.opts.Prefix+ns, glob); err != nil {
			return fmt.Errorf("dlock: list: scan: %w", err)
		}
		return nil
	}
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, l.client)
	}
	if err != nil {
		return nil, err
	}
	return redisnode.Held(ctx, names.Sorted(), inspect)
}
