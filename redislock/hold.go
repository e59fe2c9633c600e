package redislock

import (
	"context"
	_ "embed"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// The holds of semaphores and read-write locks share one layout in Redis
// and one life in this driver. Every hold, a permit, a reader or a writer,
// is a lease of its own: a member of the key's set (a sorted set of tokens
// scored by the end of their lease, on the server's clock), with its
// fence, kind and owner in the holds hash beside it (see shared.lua). So:
//
//   - a holder that crashes gives its hold back when its lease ends: the
//     next script that touches the key drops the holds whose lease has
//     ended, and hands the room to the queue;
//   - the watchdog renews a hold as it renews a lock, in the same batches
//     (refresh.lua tells a hold from a lock by the sign of its TTL), and a
//     renewal that finds the hold gone loses it (dlock.ErrOwnershipLost);
//   - waiters queue as a lock's do, and a release grants the waiters at
//     the head of the queue that now fit and wakes them on their Locker's
//     channel with the message a lock's grant sends: the waiting code,
//     the notifier and the grant's claim window are the lock's own;
//   - fences come from one counter per key, as a lock's, for readers and
//     writers alike.
//
// A handle is the driver's lock type with a kind: its Unlock, Refresh and
// TTL send the hold's scripts, and it lives in a table of its own
// (permits, or read-write holds), so that a key's lock, semaphore and
// read-write lock never meet.

// kind is what a handle holds; shared.lua stores its letter.
type kind = driver.HoldKind

// nsOf is the namespace of the keys of kind k: "<prefix>:sem:<key>" for a
// semaphore, "<prefix>:rw:<key>" for a read-write lock.
func nsOf(k kind) string { return ":" + k.Space() + ":" }

var (
	//go:embed shared_acquire.lua
	sharedAcquireLua string
	//go:embed shared_release.lua
	sharedReleaseLua string
)

// The scripts of holds: package redisnode's shared.lua (which Redlock's
// read-write locks run too) and this driver's part.
var (
	holdAcquireScript = redisnode.NewScript(sharedLua + sharedAcquireLua)
	holdReleaseScript = redisnode.NewScript(sharedLua + sharedReleaseLua)
	downgradeScript   = redisnode.NewScript(sharedLua + redisnode.DowngradeLua)
	holdTTLScript     = redisnode.NewScript(redisnode.SharedTTLLua)
)

// table is the table that lk lives in.
func (lk *hold) table() *driver.Table[*hold] { return lk.l.tables.Of(lk.Kind()) }

// leaseArg is the TTL argument of refresh.lua for a lease of ttl: negative
// for a hold, which tells refresh.lua to renew a member of a set.
func (lk *hold) leaseArg(ttl time.Duration) int64 { return lk.store().renewSign * ttl.Milliseconds() }

// prepareHold validates a call for a hold of kind k and reserves its place
// in the kind's table. A waiting call (wait) must call Leave on that table
// when it returns, if prepareHold did not fail.
func (l *Locker) prepareHold(ctx context.Context, k kind, key string, limit int, opts []dlock.Option, wait bool) (*hold, dlock.Options, error) {
	op := "lock"
	if k == driver.HoldPermit {
		op = "acquire"
	}
	tbl := l.tables.Of(k)
	if tbl.Closed() {
		return nil, dlock.Options{}, driver.Wrap(op, key, dlock.ErrClosed)
	}
	o, err := l.opts.Apply(opts...)
	if err != nil {
		return nil, o, driver.Wrap(op, key, err)
	}
	if err := checkAck(l.client, o); err != nil {
		return nil, o, driver.Wrap(op, key, err)
	}
	if k == driver.HoldPermit {
		if err := driver.CheckLimit(limit); err != nil {
			return nil, o, driver.Wrap(op, key, err)
		}
	}
	keys, err := redisnode.In(o.Prefix, nsOf(k), key)
	if err != nil {
		return nil, o, driver.Wrap(op, key, err)
	}
	if err := driver.Ended(ctx, key); err != nil {
		return nil, o, err
	}
	owner, token := o.OwnerIn(ctx), driver.NewToken()
	holder, byOption := owner, o.Owner != ""
	if k == driver.HoldPermit && owner == "" {
		// A Locker may hold many permits of a key: each is its own
		// holder in the table, found by Release as a WithOwner hold is.
		holder, byOption = token, true
	}
	lk := l.newLock(k, key, keys, token, holder, byOption, o.TTL)
	lk.ownerArg = owner
	lk.limit = int32(limit)
	lk.renew, lk.fenced = o.AutoRenew, o.Fencing
	lk.ack = ackOf(o)
	if k == driver.HoldWrite && owner == "" {
		// This Locker's own read hold would make the writer wait on
		// itself: say so rather than ErrAlreadyHeld.
		if h, err := tbl.Find(dlock.ContextWithOwner(ctx, ""), key); err == nil && h.Reads() {
			return nil, o, driver.Wrap(op, key, dlock.ErrUpgrade)
		}
	}
	if err := tbl.Reserve(lk, wait); err != nil {
		return nil, o, err
	}
	return lk, o, nil
}

// acquireHold takes a hold of kind k: one attempt, or (wait) a wait as
// Lock's.
func (l *Locker) acquireHold(ctx context.Context, k kind, key string, limit int, opts []dlock.Option, wait bool) (dlock.Lock, error) {
	lk, o, err := l.prepareHold(ctx, k, key, limit, opts, wait)
	if err != nil {
		return nil, err
	}
	tbl := lk.table()
	if !wait {
		if err := l.try(ctx, lk, o); err != nil {
			tbl.Remove(lk)
			return nil, err
		}
		return lk, nil
	}
	defer tbl.Leave()
	if k == driver.HoldWrite {
		// A waiting writer always queues, so that new readers wait behind
		// it: without wake-ups it queues as a fair waiter does, and polls.
		o.Fair = o.Fair || !o.Notify
	}
	got, err := l.wait(ctx, lk, o)
	if err != nil {
		tbl.Remove(lk)
		return nil, err
	}
	return got, nil
}

// attemptHold is attempt for a hold: one call of shared_acquire.lua.
func (l *Locker) attemptHold(ctx context.Context, lk *hold, mode attemptMode, claim time.Duration, n int64) (held bool, retryAfter time.Duration, err error) {
	sent := time.Now()
	deadline := sent.Add(lk.requestTimeout())
	fenced := "0"
	if lk.fenced {
		fenced = "1"
	}
	p, ack := l.send, (*acker)(nil)
	if lk.ack.n > 0 {
		ack = &acker{client: l.client, ack: lk.ack}
		p = ack
	}
	r, err := l.run(ctx, deadline, p, holdAcquireScript, lk.keyArgs[:], []any{lk.tokenArg, lk.ttl.Milliseconds(), lk.ownerArg,
		int(mode), claim.Milliseconds(), n, fenced, l.sub, lk.Kind().Letter(), lk.limit}, lk).Int64()
	taken := false // but not where a failover would keep it
	if err == nil && r >= 0 && ack != nil {
		err = ack.check()
		taken = err != nil
	}
	if err != nil {
		upgrade := redis.HasErrorPrefix(err, "DLOCK_UPGRADE")
		err = l.failed(ctx, lk, mode, deadline, taken, err) // the reply was lost, or a waiter leaves its queue
		if upgrade {
			err = lk.Wrap("lock", dlock.ErrUpgrade)
		}
		return false, 0, err
	}
	if r < 0 {
		return false, time.Duration(-1-r) * time.Millisecond, nil
	}
	lk.SetFence(uint64(r))
	lk.setDeadline(sent, lk.ttl)
	return true, 0, nil
}

// unlockHold is Unlock for a hold, under the rules of a lock's Unlock: a
// release that finds the hold gone within its local lease released it
// earlier (a re-sent release), and once Unlock is called nothing renews
// the hold.
func (lk *hold) unlockHold(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if err := lk.releasing(); err != nil {
		return err
	}
	n, err := holdReleaseScript.Run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg, "0").Int64()
	if err != nil {
		return lk.Wrap("unlock", err)
	}
	if n == 1 || time.Now().Before(lk.l.watchdog.Deadline(lk)) {
		lk.end(dlock.ErrNotHeld)
		return nil
	}
	return lk.lose(dlock.ErrOwnershipLost)
}

// Downgrade turns a write lock into a read lock in one round trip, with
// the same token, fence and lease (see driver.Downgrader). On any other
// handle it returns an error matching dlock.ErrInvalidOption. A Downgrade
// whose reply was lost may be called again: it finds the read lock it
// made.
func (lk *hold) Downgrade(ctx context.Context) error {
	lk.unlockMu.Lock()
	defer lk.unlockMu.Unlock()
	if err := lk.CheckDowngrade(); err != nil {
		return err
	}
	n, err := downgradeScript.Run(ctx, lk.l.send, lk.keyArgs[:], lk.tokenArg).Int64()
	if err != nil {
		return lk.Wrap("downgrade", err)
	}
	if n == 0 {
		return lk.lose(dlock.ErrOwnershipLost)
	}
	lk.Downgraded() // 1, or -1: an earlier Downgrade of ours whose reply was lost
	return nil
}
