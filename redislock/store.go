package redislock

import (
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// A store is how a hold lives in Redis, as the calls whose script differs
// by it see it: a lock is the key's own value (lock.lua), a permit or a
// read or write hold a member of the key's set of holds (shared.lua). A
// hold's store follows from its kind; the attempt and Unlock of each have
// code of their own (lock.go, hold.go).
type store struct {
	// release and ttl are the release and TTL scripts, whose arguments
	// begin with the token and, where owned, the owner (see hold.args).
	release, ttl *redisnode.Script
	owned        bool
	// renewSign is the sign of refresh.lua's TTL argument, negative for a
	// member of a set.
	renewSign int64
}

var (
	lockStore = store{release: releaseScript, ttl: ttlScript, owned: true, renewSign: 1}
	setStore  = store{release: holdReleaseScript, ttl: holdTTLScript, renewSign: -1}
)

// store is how lk lives in Redis, by its kind (a Downgrade keeps a hold
// in the set).
func (lk *hold) store() *store {
	if lk.Kind() == driver.HoldLock {
		return &lockStore
	}
	return &setStore
}

// args appends to buf the arguments that lk's store's scripts begin with,
// then more.
func (lk *hold) args(buf []any, more ...any) []any {
	buf = append(buf, lk.tokenArg)
	if lk.store().owned {
		buf = append(buf, lk.ownerArg)
	}
	return append(buf, more...)
}
