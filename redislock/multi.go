package redislock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed all.lua
	allLua string
	//go:embed lock_all.lua
	lockAllLua string
	//go:embed unlock_all.lua
	unlockAllLua string
)

// The scripts of several locks at once.
var (
	lockAllScript   = redisnode.NewScript(lockLua + allLua + lockAllLua)
	unlockAllScript = redisnode.NewScript(lockLua + allLua + unlockAllLua)
)

var _ driver.MultiLocker = (*Locker)(nil)

// TryLockMulti makes one attempt at every key of keys at once, all or
// none, in one round trip: one call of a script that takes each lock as
// TryLock would (a free lock, or the owner's lock again), or, when one of
// them is busy, takes none and answers that key's *dlock.NotAcquiredError
// with the holder's remaining lease. It returns one Lock per key, in the
// order of keys; each is a lock of its own, renewed by the watchdog with
// the others in its batches, and released by its own Unlock or, with the
// others, by UnlockMulti.
//
// The keys can be taken together when the client talks to one server (a
// single server or Sentinel's master), or when they are in one Cluster
// slot (they share a hash tag, as in "{user:42}:cart" and
// "{user:42}:wallet"). Otherwise, and for fair (dlock.WithFair) or
// replica-acknowledged (WithReplicaAck) acquisitions, which the script
// does not make, it returns an error matching dlock.ErrNotTogether and
// changes nothing: dlock.LockAll then takes the keys one by one.
func (l *Locker) TryLockMulti(ctx context.Context, keys []string, opts ...dlock.Option) ([]dlock.Lock, error) {
	if len(keys) == 0 {
		return nil, &dlock.KeyError{Op: "lock", Err: fmt.Errorf("%w: no keys", dlock.ErrInvalidKey)}
	}
	locks := make([]*hold, 0, len(keys))
	fail := func(err error, failed bool) ([]dlock.Lock, error) {
		for _, lk := range locks {
			l.tables.Locks.Remove(lk)
			if failed {
				l.tables.Locks.Failed(lk, false, err)
			}
		}
		return nil, err
	}
	for i, key := range keys {
		lk, o, err := l.prepare(ctx, key, opts, false)
		if err != nil {
			return fail(err, false)
		}
		locks = append(locks, lk)
		if o.Fair || ackOf(o).n > 0 {
			return fail(driver.Wrap("lock", key, dlock.ErrNotTogether), false)
		}
		for _, k := range keys[:i] {
			if k == key {
				return fail(driver.Wrap("lock", key, fmt.Errorf("%w: %q twice", dlock.ErrInvalidKey, key)), false)
			}
		}
	}
	if !l.together(locks) {
		return fail(driver.Wrap("lock", keys[0], dlock.ErrNotTogether), false)
	}
	if err := l.attemptAll(ctx, locks); err != nil {
		return fail(err, true)
	}
	out := make([]dlock.Lock, len(locks))
	for i, lk := range locks {
		if _, err := l.acquired(ctx, lk); err != nil {
			// The Locker closed: Close releases the locks recorded before
			// this one, acquired gave this one back, and the rest go back
			// here.
			for _, rest := range locks[i+1:] {
				l.tables.Locks.Remove(rest)
				l.giveBack(ctx, rest, time.Now().Add(giveBackTimeout))
			}
			return nil, err
		}
		out[i] = lk
	}
	return out, nil
}

// together reports whether one script call can act on every lock of
// locks: the client talks to one server, or the locks share a Cluster
// slot (and so do their companion keys).
func (l *Locker) together(locks []*hold) bool {
	if l.oneServer {
		return true
	}
	if _, ok := l.client.(*redis.ClusterClient); !ok {
		return false
	}
	s := redisnode.Slot(locks[0].keys.Lock)
	for _, lk := range locks[1:] {
		if redisnode.Slot(lk.keys.Lock) != s {
			return false
		}
	}
	return true
}

// attemptAll is attempt for several locks of one owner and one lease: one
// call of lock_all.lua. It sets each lock's fence and deadline when it
// took them all, and gives back what a call whose reply was lost may have
// taken.
func (l *Locker) attemptAll(ctx context.Context, locks []*hold) error {
	first := locks[0]
	ttl := l.ttlArg
	if first.ttl != l.opts.TTL {
		ttl = first.ttl.Milliseconds()
	}
	fenced := "0"
	if first.fenced {
		fenced = "1"
	}
	keys := make([]any, 0, len(first.keyArgs)*len(locks))
	args := make([]any, 0, 3+len(locks))
	args = append(args, ttl, first.ownerArg, fenced)
	for _, lk := range locks {
		l.tables.Locks.Attempted(lk)
		keys = append(keys, lk.keyArgs[:]...)
		args = append(args, lk.tokenArg)
	}
	sent := time.Now()
	deadline := sent.Add(RequestTimeout)
	reply, err := l.runAll(ctx, deadline, l.send, lockAllScript, keys, args, locks).Int64Slice()
	if err == nil && (len(reply) < 2 || reply[0] < 0 || reply[0] > int64(len(locks)) || reply[0] == 0 && len(reply) != 1+len(locks)) {
		err = fmt.Errorf("lock_all.lua answered %v", reply)
	}
	if err != nil {
		if !errors.As(err, new(*noReplyError)) && !errors.As(err, new(redis.Error)) {
			// The reply was lost: the call may have run. (One whose reply
			// was not waited for is given back by its worker.)
			var gerrs []error
			for _, lk := range locks {
				gerrs = append(gerrs, l.giveBack(ctx, lk, deadline))
			}
			err = errors.Join(append([]error{err}, gerrs...)...)
		}
		return first.Wrap("lock", err)
	}
	if i := reply[0]; i > 0 {
		r := reply[1]
		return &dlock.NotAcquiredError{Key: locks[i-1].Key(), RetryAfter: time.Duration(-1-r) * time.Millisecond}
	}
	for i, lk := range locks {
		lk.SetFence(uint64(reply[1+i]))
		lk.setDeadline(sent, lk.ttl)
	}
	return nil
}

// UnlockMulti releases locks, as each one's Unlock would, in one round
// trip when they are this Locker's locks (not semaphore permits nor
// read-write locks) of one owner that one script call can reach (see
// TryLockMulti): one call of a script that releases each as Unlock's
// release.lua does, and hands each to its first waiter. Otherwise it
// unlocks them one by one, the last first. It returns the errors of the
// releases that failed, joined.
func (l *Locker) UnlockMulti(ctx context.Context, locks []dlock.Lock) error {
	own := make([]*hold, 0, len(locks))
	for _, x := range locks {
		lk, ok := x.(*hold)
		if !ok || lk.l != l || lk.Kind() != driver.HoldLock || lk.ack.n > 0 || len(own) > 0 && lk.Owner() != own[0].Owner() {
			return unlockEach(ctx, locks)
		}
		own = append(own, lk)
	}
	if len(own) == 0 || !l.together(own) {
		return unlockEach(ctx, locks)
	}
	// The mutexes are taken in the order of locks: an Unlock takes one
	// alone, and dlock.MultiLock passes its locks in the keys' order, so
	// no two calls wait on each other in a cycle.
	var errs []error
	live := own[:0:0]
	for _, lk := range own {
		lk.unlockMu.Lock()
		defer lk.unlockMu.Unlock()
		if err := lk.releasing(); err != nil {
			errs = append(errs, err)
			continue
		}
		live = append(live, lk)
	}
	if len(live) == 0 {
		return errors.Join(errs...)
	}
	began := time.Now()
	keys := make([]any, 0, len(live[0].keyArgs)*len(live))
	args := make([]any, 0, 1+len(live))
	args = append(args, live[0].ownerArg)
	for _, lk := range live {
		keys = append(keys, lk.keyArgs[:]...)
		args = append(args, lk.tokenArg)
	}
	reply, err := unlockAllScript.Run(ctx, l.send, keys, args...).Int64Slice()
	if err == nil && len(reply) != len(live) {
		err = fmt.Errorf("unlock_all.lua answered %d replies for %d locks", len(reply), len(live))
	}
	for i, lk := range live {
		if err != nil {
			lk.unknown = true
			errs = append(errs, lk.Wrap("unlock", err))
		} else if rerr := lk.released(reply[i], began); rerr != nil {
			errs = append(errs, rerr)
		}
	}
	return errors.Join(errs...)
}

// unlockEach unlocks locks one by one, the last first, and joins the
// errors.
func unlockEach(ctx context.Context, locks []dlock.Lock) error {
	var errs []error
	for i := len(locks) - 1; i >= 0; i-- {
		if err := locks[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
