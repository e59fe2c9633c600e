package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// inspectLimit bounds the holds of one lock that Inspect and ForceUnlock
// read, and the distinct leases whose remaining time List asks etcd for.
// The count of holds is exact beyond it.
const inspectLimit = 64

// listPage is the number of etcd keys List reads per range request.
const listPage = 500

// leaseTTLs remembers the remaining time of leases during one call, since
// locks acquired with the default TTL share one lease.
type leaseTTLs map[clientv3.LeaseID]time.Duration

// gone marks a lease etcd no longer has.
const gone = time.Duration(-2)

// ttl returns the remaining time of lease id, or gone.
func (l *Locker) ttl(ctx context.Context, c leaseTTLs, id clientv3.LeaseID) (time.Duration, error) {
	if d, ok := c[id]; ok {
		return d, nil
	}
	r, err := l.cli.TimeToLive(ctx, id)
	d := time.Duration(0)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		d = gone
	case err != nil:
		return 0, err
	case r.TTL < 0:
		d = gone
	default:
		d = time.Duration(r.TTL) * time.Second
	}
	c[id] = d
	return d, nil
}

// describe fills info for a held lock from its newest hold, its count of
// holds and the leases of (some of) its holds. It reports whether any of
// those leases is still alive.
func (l *Locker) describe(ctx context.Context, c leaseTTLs, info *dlock.Info, newest *mvccpb.KeyValue, holds int, leases []clientv3.LeaseID) (alive bool, err error) {
	info.Held = true
	info.Holds = holds
	info.Owner = string(newest.Value)
	info.Fence, info.FenceKnown = uint64(newest.CreateRevision), true
	info.TTL = 0
	for _, id := range leases {
		if id == clientv3.NoLease {
			info.TTL, alive = -1, true
			break
		}
		d, err := l.ttl(ctx, c, id)
		if err != nil {
			return false, err
		}
		if d != gone {
			alive = true
			info.TTL = max(info.TTL, d)
		}
	}
	return alive, nil
}

// leasesOf returns the distinct leases of kvs, at most inspectLimit.
func leasesOf(kvs []*mvccpb.KeyValue) []clientv3.LeaseID {
	var ids []clientv3.LeaseID
	for _, kv := range kvs {
		id := clientv3.LeaseID(kv.Lease)
		if !slices.Contains(ids, id) && len(ids) < inspectLimit {
			ids = append(ids, id)
		}
	}
	return ids
}

// Inspect reads what etcd holds about key: one range read of its holds
// (at most 64, newest first, with their exact count) and one lease
// lookup per distinct lease among them. It changes nothing. A lock whose
// leases all ran out between the two reads is reported free.
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	if err := driver.CheckKey(key); err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	p := l.rangeOf(key)
	resp, err := l.cli.Get(ctx, p, clientv3.WithRange(clientv3.GetPrefixRangeEnd(p)),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(inspectLimit))
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	info := dlock.Info{Key: key}
	if len(resp.Kvs) == 0 {
		return info, nil
	}
	alive, err := l.describe(ctx, leaseTTLs{}, &info, resp.Kvs[0], int(resp.Count), leasesOf(resp.Kvs))
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	if !alive {
		return dlock.Info{Key: key}, nil
	}
	return info, nil
}

// List returns the locks held under the Locker's prefix whose key matches
// pattern, sorted by key. The pattern has Redis's glob syntax, so that
// `dlock ls` reads the same on every backend: * matches any run of
// characters ('/' included), ? one character, [abc], [a-z] and [^a] a set,
// and \ escapes; "" matches all. A malformed pattern (an unclosed [, a
// trailing \) is an error matching [path.ErrBadPattern].
//
// List reads the prefix's range in pages of 500 etcd keys, starting at the
// pattern's literal head, so it never loads the keyspace at once; each
// page is read at the latest revision, so a lock taken or released during
// the walk may or may not be listed. It asks etcd for the remaining time of
// each distinct lease once.
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return nil, dlock.ErrClosed
	}
	glob, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	head := l.opts.Prefix + "/lock/"
	from := head + escape(glob.Literal())
	end := clientv3.GetPrefixRangeEnd(from)
	ttls := leaseTTLs{}

	// The holds of one lock are adjacent in key order (they share the
	// range "<head><escaped key>/"): gather them, then describe the lock.
	var (
		infos  []dlock.Info
		esc    string // the escaped key of the lock being gathered
		newest *mvccpb.KeyValue
		holds  int
		leases []clientv3.LeaseID
	)
	flush := func() error {
		if newest == nil {
			return nil
		}
		defer func() { newest, holds, leases = nil, 0, nil }()
		key, ok := unescape(esc)
		if !ok || driver.CheckKey(key) != nil || !glob.Match(key) {
			return nil
		}
		info := dlock.Info{Key: key}
		alive, err := l.describe(ctx, ttls, &info, newest, holds, leases)
		if err != nil {
			return fmt.Errorf("dlock: list: %q: %w", key, err)
		}
		if alive {
			infos = append(infos, info)
		}
		return nil
	}
	for {
		resp, err := l.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(listPage))
		if err != nil {
			return nil, fmt.Errorf("dlock: list: %w", err)
		}
		for _, kv := range resp.Kvs {
			e, token, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), head), "/")
			if !ok || token == "" || strings.Contains(token, "/") {
				continue // not a hold: written by another program
			}
			if e != esc {
				if err := flush(); err != nil {
					return nil, err
				}
				esc = e
			}
			holds++
			if newest == nil || kv.CreateRevision > newest.CreateRevision {
				newest = kv
			}
			if id := clientv3.LeaseID(kv.Lease); !slices.Contains(leases, id) && len(leases) < inspectLimit {
				leases = append(leases, id)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if err := flush(); err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b dlock.Info) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// unescape reverses escape, and reports false for a name escape cannot
// have written.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// ForceUnlock deletes every hold of key's lock, whoever holds it. It is for
// an operator clearing a stuck lock: each holder, if alive, sees its key
// deleted and loses the lock (its Done closes, Err matches
// dlock.ErrOwnershipLost), and waiters wake up to acquire it. The leases
// stay: they may hold other locks. It returns what it deleted, or an error
// matching dlock.ErrNotHeld when the lock was free.
//
// It reads the holds and their leases first, then deletes them in a
// transaction that succeeds only if the holds did not change since the read
// (else it reads again): the lease an evicted holder had left is read
// before that holder, seeing its key gone, revokes it.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	if err := driver.CheckKey(key); err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	p := l.rangeOf(key)
	end := clientv3.GetPrefixRangeEnd(p)
	for range maxRaces {
		resp, err := l.cli.Get(ctx, p, clientv3.WithRange(end),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(inspectLimit))
		if err != nil {
			return dlock.Info{}, driver.Wrap("force unlock", key, err)
		}
		if len(resp.Kvs) == 0 {
			return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrNotHeld)
		}
		info := dlock.Info{Key: key}
		if _, err := l.describe(ctx, leaseTTLs{}, &info, resp.Kvs[0], int(resp.Count), leasesOf(resp.Kvs)); err != nil {
			l.opts.Logger.DebugContext(ctx, "force unlock: lease lookup failed", "key", key, "error", err)
		}
		unchanged := clientv3.Compare(clientv3.ModRevision(p), "<", resp.Header.Revision+1).WithRange(end)
		// The holds' keys in the line of waiters go too (see inLine): the
		// next waiter watches them.
		ops := []clientv3.Op{clientv3.OpDelete(p, clientv3.WithRange(end))}
		for _, kv := range resp.Kvs {
			ops = append(ops, clientv3.OpDelete(l.lineOf(key)+strings.TrimPrefix(string(kv.Key), p)))
		}
		del, err := l.cli.Txn(ctx).If(unchanged).Then(ops...).Commit()
		if err != nil {
			return dlock.Info{}, driver.Wrap("force unlock", key, err)
		}
		if del.Succeeded {
			return info, nil
		}
	}
	return dlock.Info{}, driver.Wrap("force unlock", key, fmt.Errorf("the holds kept changing; %d attempts", maxRaces))
}
