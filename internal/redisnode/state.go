package redisnode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// State is what one node holds about a lock.
type State struct {
	Value   string        // the lock key's value: a token, or "o:<owner>"; "" when free
	TTL     time.Duration // the lock's remaining lease; -1 when it has no expiry
	Holds   int           // the holds of an owner's lock
	Fence   uint64        // the node's fence counter of the key
	Waiters int           // the entries of the wait queue
}

// Read reads the state of the lock of k on c, in one round trip: a MULTI
// block over the lock's keys, which share a Cluster slot. It changes
// nothing.
func Read(ctx context.Context, c redis.Cmdable, k *Keys) (State, error) {
	var (
		get     *redis.StringCmd
		pttl    *redis.DurationCmd
		fence   *redis.StringCmd
		holds   *redis.IntCmd
		waiters *redis.IntCmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k.Lock)
		pttl = p.PTTL(ctx, k.Lock)
		fence = p.HGet(ctx, k.Meta, "f")
		holds = p.HLen(ctx, k.Holds)
		waiters = p.ZCard(ctx, k.Queue)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return State{}, err
	}
	s := State{Value: get.Val(), TTL: pttl.Val(), Holds: int(holds.Val()), Waiters: int(waiters.Val())}
	if s.TTL < 0 { // go-redis reports "no expiry" as -1ns
		s.TTL = -1
	}
	if f := fence.Val(); f != "" {
		if s.Fence, err = strconv.ParseUint(f, 10, 64); err != nil {
			return State{}, fmt.Errorf("fence counter %q: %w", f, err)
		}
	}
	return s, nil
}

// ForceReply reads the reply of a script that deleted a lock: its value,
// PTTL in milliseconds, holds and fence counter, as State.
func ForceReply(res []any) (State, error) {
	if len(res) != 4 {
		return State{}, fmt.Errorf("unexpected reply %v", res)
	}
	value, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	holds, _ := res[2].(int64)
	fence, _ := res[3].(int64)
	s := State{Value: value, TTL: time.Duration(pttl) * time.Millisecond, Holds: int(holds), Fence: uint64(fence)}
	if pttl < 0 {
		s.TTL = -1
	}
	return s, nil
}

// Describe records in info the holder that s names, when the lock is
// held: its lease, and its owner and holds for an owner's lock.
func (s State) Describe(info *dlock.Info) {
	if s.Value == "" {
		return
	}
	info.Held, info.TTL, info.Holds = true, s.TTL, 1
	if owner, ok := strings.CutPrefix(s.Value, "o:"); ok { // a token never has ':'
		info.Owner, info.Holds = owner, s.Holds
	}
}
