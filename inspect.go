package dlock

import (
	"context"
	"strconv"
	"time"
)

// Inspector is an operator's view of a lock store: who holds a lock, and
// the means to clear a stuck one. Every driver's Locker implements it; the
// dlock command's status, ls and unlock are built on it.
type Inspector interface {
	// Inspect reads what the store holds about key. It changes nothing.
	Inspect(ctx context.Context, key string) (Info, error)
	// List returns the held locks whose key matches pattern, sorted by
	// key. The pattern has Redis's glob syntax on every backend: * matches
	// any run of characters, ? one character, [abc], [a-z] and [^a] a set,
	// and \ escapes; "" matches all. A malformed pattern is an error
	// matching path.ErrBadPattern.
	List(ctx context.Context, pattern string) ([]Info, error)
	// ForceUnlock deletes key's lock whoever holds it, with all its holds.
	// Each holder still alive loses the lock (its Done closes, its Err
	// matches ErrOwnershipLost). It returns what it deleted, or an error
	// matching ErrNotHeld when the lock was free.
	ForceUnlock(ctx context.Context, key string) (Info, error)
}

// Info is what a lock store holds about one lock, as an operator sees it.
// It never carries a token, which would let its reader release the lock.
// A store may not know every field: FenceKnown and WaitersKnown say so,
// and a field that is not known is zero.
type Info struct {
	// Key is the key as callers name it, without the Locker's prefix.
	Key string
	// Held says whether someone holds the lock.
	Held bool
	// Owner is the owner id of a reentrant lock (see WithOwner), "" for a
	// plain lock or a free one.
	Owner string
	// Holds counts the holds on the lock: 1 for a held plain lock, the
	// number of holds of an owner's lock, 0 when free.
	Holds int
	// TTL is the remaining lease of a held lock, zero when free. It is -1
	// when the lock has no expiry, which dlock never does: another program
	// wrote it. Stores that count leases in whole seconds (etcd) truncate.
	TTL time.Duration
	// Fence is the fence of the lock's latest acquisition: the holder's,
	// while held; 0 if it was never acquired.
	Fence uint64
	// FenceKnown says whether the store could tell Fence. etcd keeps
	// nothing of a released lock, so the fence of a free lock is unknown
	// there.
	FenceKnown bool
	// Waiters counts the callers waiting for the lock, where the store
	// keeps a queue (Redis; the entries of waiters that died stay until
	// their claim window lapses).
	Waiters int
	// WaitersKnown says whether the store counts waiters. etcd's waiters
	// watch the lock and leave no trace in the store.
	WaitersKnown bool
	// Kind says what Key names: a lock (the zero Kind), a semaphore or a
	// read-write lock. For the last two, Holds counts the permits out or
	// the read and write holds, and TTL is the longest lease among them:
	// the time until the key is free, unless they are renewed.
	Kind Kind
	// Limit is a semaphore's limit (the one its latest acquisition gave),
	// 0 for the other kinds.
	Limit int
	// Readers counts the read holds of a read-write lock; its other holds,
	// if any, are a writer's.
	Readers int
}

// Kind is what an [Info] describes.
type Kind uint8

// The kinds of lock an Inspector can describe.
const (
	KindLock      Kind = iota // a Lock of a Locker
	KindSemaphore             // the permits of a Semaphore
	KindRWLock                // the read and write locks of an RWLocker
)

// String returns "lock", "semaphore" or "rwlock".
func (k Kind) String() string {
	switch k {
	case KindLock:
		return "lock"
	case KindSemaphore:
		return "semaphore"
	case KindRWLock:
		return "rwlock"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}
