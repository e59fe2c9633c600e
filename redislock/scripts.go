package redislock

import (
	_ "embed"

	"github.com/dlock-go/dlock/internal/redisnode"
)

var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed try.lua
	tryLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release_head.lua
	releaseHeadLua string
	//go:embed release.lua
	releaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed lapse.lua
	lapseLua string
	//go:embed ttl.lua
	ttlLua string
	//go:embed renew_plain.lua
	renewPlainLua string
)

// The preludes of the scripts: this driver's fence counter and package
// redisnode's helpers, before a lock's scripts and before a hold's.
var (
	lockLua   = preludeLua + redisnode.BaseLua + redisnode.LockLua
	sharedLua = preludeLua + redisnode.BaseLua + redisnode.SharedLua
)

// The scripts, immutable once built.
var (
	tryScript     = redisnode.NewScript(preludeLua + redisnode.BaseLua + tryLua)
	acquireScript = redisnode.NewScript(lockLua + acquireLua)
	releaseScript = redisnode.NewScript(releaseHeadLua + lockLua + releaseLua)
	refreshScript = redisnode.NewScript(redisnode.LeaseLua + refreshLua)
	lapseScript   = redisnode.NewScript(redisnode.LeaseLua + lapseLua)
	renewScript   = redisnode.NewScript(redisnode.LeaseLua + redisnode.RenewLua)
	renewPlain    = redisnode.NewScript(renewPlainLua)
	ttlScript     = redisnode.NewScript(redisnode.LeaseLua + ttlLua)
)

// attemptMode says how acquire.lua attempts: a set of bit flags.
type attemptMode uint8

// The attempt modes.
const (
	modeTry  attemptMode = 0      // one attempt: take the lock if it is free
	modeFair attemptMode = 1 << 0 // not while a live waiter queues ahead
	modeWait attemptMode = 1 << 1 // when busy, join the queue

	// modeRetried marks a waiter's bare first attempt, whose next attempt,
	// by script, follows at once when the lock is busy: that attempt finds
	// the lock ours if go-redis re-sent the SET and its first run set it.
	// The scripts never see it.
	modeRetried attemptMode = 1 << 7
)

// Replies of release.lua.
const (
	releaseTaken = -1 // another party holds the lock
	releaseGone  = 0  // the hold is gone: released before, or deleted
	releaseDone  = 1
)
