package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// InspectKind reads what etcd holds about key's lock of kind k: one range
// read of its queue, and one lease lookup per distinct lease among its
// holds; for dlock.KindLock it is Inspect. It changes nothing. The queue
// tells holds from waiters by the rules that admit them, under the
// semaphore's current limit: after the limit was lowered, the permits
// above it count as waiters until they are released. The fence is the
// latest revision at which one of the holds was taken or rewritten (a
// Downgrade, a Refresh to another TTL), at least the fence of each.
func (l *Locker) InspectKind(ctx context.Context, k dlock.Kind, key string) (dlock.Info, error) {
	if k == dlock.KindLock {
		return l.Inspect(ctx, key)
	}
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	kd, err := driver.HoldKindOf(k)
	if err == nil {
		err = driver.CheckKey(key)
	}
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	info, err := l.inspectQueue(ctx, leaseTTLs{}, kd, key)
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	return info, nil
}

// inspectQueue describes the queue of key's holds of kind kd.
func (l *Locker) inspectQueue(ctx context.Context, ttls leaseTTLs, kd kind, key string) (dlock.Info, error) {
	base := l.baseOf(kd, key)
	resp, err := l.cli.Get(ctx, base, clientv3.WithRange(clientv3.GetPrefixRangeEnd(base)))
	if err != nil {
		return dlock.Info{}, err
	}
	v := newView(base, resp.Header.Revision, resp.Kvs)
	info := dlock.Info{Key: key, Kind: dlock.KindRWLock, FenceKnown: true, WaitersKnown: true}
	if kd == driver.HoldPermit {
		info.Kind, info.Limit = dlock.KindSemaphore, v.limitOr(0)
	}
	var tally driver.Tally
	for _, e := range v.entries {
		if ok, _ := v.admits(e, e.limit); !ok {
			info.Waiters++
			continue
		}
		d, err := l.ttl(ctx, ttls, e.lease)
		if err != nil {
			return dlock.Info{}, err
		}
		if d == gone {
			continue
		}
		tally.Add(&info, e.kind, e.owner, d)
		info.Fence = max(info.Fence, uint64(e.mod))
	}
	return info, nil
}

// ListKind returns the held locks of kind k under the Locker's prefix whose
// key matches pattern (see List), sorted by key: it reads the keys of the
// kind's namespace in pages of 500, keys only, then inspects each lock
// that matches (see InspectKind). For dlock.KindLock it is List.
func (l *Locker) ListKind(ctx context.Context, k dlock.Kind, pattern string) ([]dlock.Info, error) {
	if k == dlock.KindLock {
		return l.List(ctx, pattern)
	}
	if l.tables.Locks.Closed() {
		return nil, dlock.ErrClosed
	}
	kd, err := driver.HoldKindOf(k)
	if err != nil {
		return nil, err
	}
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	head := strings.TrimSuffix(l.baseOf(kd, ""), "/")
	from := head + escape(glob.Literal())
	end := clientv3.GetPrefixRangeEnd(from)
	var keys []string
	for {
		resp, err := l.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(listPage))
		if err != nil {
			return nil, fmt.Errorf("dlock: list: %w", err)
		}
		for _, kv := range resp.Kvs {
			esc, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), head), "/")
			if key, uok := unescape(esc); ok && uok && driver.CheckKey(key) == nil && glob.Match(key) &&
				(len(keys) == 0 || keys[len(keys)-1] != key) {
				keys = append(keys, key)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	ttls := leaseTTLs{}
	var infos []dlock.Info
	for _, key := range keys {
		info, err := l.inspectQueue(ctx, ttls, kd, key)
		if err != nil {
			return nil, fmt.Errorf("dlock: list: %q: %w", key, err)
		}
		if info.Held {
			infos = append(infos, info)
		}
	}
	return infos, nil
}
