package etcdlock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TryRLock makes one attempt to take the read lock of key (see
// dlock.RWLocker), in one round trip when it is granted: it succeeds
// unless a writer of another owner holds or waits for the key (an owner
// that holds the key already is not held back by a waiting writer). The
// read-write lock of key lives beside the lock of key: its keys are
// "<prefix>/rw/<key>/<token>".
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldRead, key, 0, false, opts)
}

// RLock waits until it holds the read lock of key, as Lock waits: it is
// admitted when no writer of another owner is ahead of it in the key's
// queue.
func (l *Locker) RLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldRead, key, 0, true, opts)
}

// TryWLock makes one attempt to take the write lock of key: it succeeds
// when nobody else holds or waits for the key's read or write lock. An
// owner that holds the read lock gets an error matching dlock.ErrUpgrade.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldWrite, key, 0, false, opts)
}

// WLock waits until it holds the write lock of key, as Lock waits. Its key
// queues from the first attempt, and new readers wait behind it. The
// handle is a driver.Downgrader.
func (l *Locker) WLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return l.take(ctx, driver.HoldWrite, key, 0, true, opts)
}

// RUnlock releases this Locker's most recent read lock of key for the
// owner in ctx, in the manner of Unlock. It returns an error matching
// dlock.ErrNotHeld when there is none.
func (l *Locker) RUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, true)
}

// WUnlock releases this Locker's most recent write lock of key for the
// owner in ctx, in the manner of Unlock.
func (l *Locker) WUnlock(ctx context.Context, key string) error {
	return l.tables.UnlockRW(ctx, key, false)
}

// setValue sets the etcd value of the hold's key, as written.
func (h *hold) setValue(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.val = v
}

// Downgrade turns a write lock into a read lock in one round trip (see
// driver.Downgrader): a transaction rewrites the value of the hold's key
// from writer to reader, on the condition that the key is the one the
// hold created. The key keeps its place in the queue, its lease and its
// create revision, and the handle its token and fence: no writer can come
// in between, and the readers queued behind it that no other writer holds
// back are admitted. On any other handle it returns an error matching
// dlock.ErrInvalidOption. A Downgrade whose reply was lost may be called
// again.
func (h *hold) Downgrade(ctx context.Context) error {
	h.mu.Lock()
	val := h.val
	h.mu.Unlock()
	if err := h.CheckDowngrade(); err != nil {
		return err
	}
	read := string(rune(driver.HoldRead)) + val[1:]
	resp, err := h.l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)).
		Then(clientv3.OpPut(h.name, read, clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return h.Wrap("downgrade", err)
	}
	if !resp.Succeeded {
		h.lose(fmt.Errorf("%w: the etcd key of revision %d is gone", dlock.ErrOwnershipLost, h.rev))
		return h.Err()
	}
	h.mu.Lock()
	h.val = read
	h.Downgraded()
	h.mu.Unlock()
	return nil
}
