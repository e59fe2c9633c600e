package dlocktest

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// holdKind is one kind of hold of the matrix, seen as a dlock.Locker so
// that every operation runs on it alike.
type holdKind struct {
	name    string
	column  string         // the table's column its cells count for
	feature driver.Feature // what the Locker must offer; 0: every Locker does
	shared  bool           // holds of several parties overlap (the read side)
	of      func(dlock.Locker) dlock.Locker
	rival   func(dlock.Locker) dlock.Locker // what another party takes to find the key busy; nil: of
}

// kinds are the kinds of hold, in the order of the matrix.
var kinds = []holdKind{
	{name: "lock", column: colLock, of: func(l dlock.Locker) dlock.Locker { return l }},
	{name: "permit", column: colSemaphore, feature: driver.FeatureSemaphore, of: func(l dlock.Locker) dlock.Locker {
		return dlock.Permits(l.(dlock.Semaphore), 1)
	}},
	{name: "read", column: colRWLock, feature: driver.FeatureRWLock, shared: true,
		of:    func(l dlock.Locker) dlock.Locker { return dlock.RLocker(l.(dlock.RWLocker)) },
		rival: func(l dlock.Locker) dlock.Locker { return dlock.WLocker(l.(dlock.RWLocker)) }},
	{name: "write", column: colRWLock, feature: driver.FeatureRWLock, of: func(l dlock.Locker) dlock.Locker {
		return dlock.WLocker(l.(dlock.RWLocker))
	}},
	{name: "multi", column: colLockAll, of: func(l dlock.Locker) dlock.Locker { return allOf{l} }},
}

func (k holdKind) rivalOf(l dlock.Locker) dlock.Locker {
	if k.rival != nil {
		return k.rival(l)
	}
	return k.of(l)
}

// allOf is a Locker whose lock of key is the lock of two keys taken with
// dlock.LockAll: the several-keys kind of hold.
type allOf struct{ l dlock.Locker }

func (a allOf) parts(key string) []string { return []string{key + ":1", key + ":2"} }

func (a allOf) TryLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return dlock.TryLockAll(ctx, a.l, a.parts(key), opts...)
}

func (a allOf) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return dlock.LockAll(ctx, a.l, a.parts(key), opts...)
}

func (a allOf) Unlock(context.Context, string) error {
	return fmt.Errorf("dlocktest: release the Lock that LockAll returned: %w", errors.ErrUnsupported)
}

func (a allOf) Close() error { return a.l.Close() }
