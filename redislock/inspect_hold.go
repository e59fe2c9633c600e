package redislock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

var _ driver.KindInspector = (*Locker)(nil)

// InspectKind reads what Redis holds about key's lock of kind k, in one
// round trip; for dlock.KindLock it is Inspect. It changes nothing: holds
// whose lease has ended are not counted, though no script has dropped
// them yet.
func (l *Locker) InspectKind(ctx context.Context, k dlock.Kind, key string) (dlock.Info, error) {
	if k == dlock.KindLock {
		return l.Inspect(ctx, key)
	}
	if l.tables.Locks.Closed() {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	kd, err := driver.HoldKindOf(k)
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	ks, err := redisnode.In(l.opts.Prefix, nsOf(kd), key)
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	var (
		now     *redis.TimeCmd
		set     *redis.ZSliceCmd
		holds   *redis.MapStringStringCmd
		meta    *redis.SliceCmd
		waiters *redis.IntCmd
	)
	_, err = l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		set = p.ZRangeWithScores(ctx, ks.Lock, 0, -1)
		holds = p.HGetAll(ctx, ks.Holds)
		meta = p.HMGet(ctx, ks.Meta, "f", "n")
		waiters = p.ZCard(ctx, ks.Queue)
		return nil
	})
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	info := dlock.Info{Key: key, Kind: k, FenceKnown: true, Waiters: int(waiters.Val()), WaitersKnown: true}
	m := meta.Val()
	if f, ok := m[0].(string); ok {
		info.Fence, _ = strconv.ParseUint(f, 10, 64)
	}
	if n, ok := m[1].(string); ok && k == dlock.KindSemaphore {
		info.Limit, _ = strconv.Atoi(n)
	}
	nowMs := float64(now.Val().UnixMilli())
	hs := holds.Val()
	var tally driver.Tally
	for _, z := range set.Val() {
		if z.Score <= nowMs {
			continue // its lease has ended
		}
		token, _ := z.Member.(string)
		v, ok := hs[token]
		if !ok {
			continue
		}
		_, rest, _ := strings.Cut(v, "|") // the fence: the counter read above is the latest
		letter, owner, _ := strings.Cut(rest, "|")
		hk := driver.HoldWrite // or a permit: only readers are told apart
		if letter == driver.HoldRead.Letter() {
			hk = driver.HoldRead
		}
		tally.Add(&info, hk, owner, time.Duration(z.Score-nowMs)*time.Millisecond)
	}
	return info, nil
}

// ListKind returns the held locks of kind k under the Locker's prefix whose
// key matches pattern, sorted by key, walking the keyspace with SCAN as
// List does; for dlock.KindLock it is List.
func (l *Locker) ListKind(ctx context.Context, k dlock.Kind, pattern string) ([]dlock.Info, error) {
	if k == dlock.KindLock {
		return l.List(ctx, pattern)
	}
	kd, err := driver.HoldKindOf(k)
	if err != nil {
		return nil, err
	}
	return l.list(ctx, nsOf(kd), pattern, func(ctx context.Context, key string) (dlock.Info, error) {
		return l.InspectKind(ctx, k, key)
	})
}
