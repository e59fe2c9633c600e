package redlock

import (
	_ "embed"

	"github.com/dlock-go/dlock/internal/redisnode"
)

var (
	//go:embed counter.lua
	counterLua string
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed raise.lua
	raiseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed ttl.lua
	ttlLua string
	//go:embed force.lua
	forceLua string
	//go:embed lapse.lua
	lapseLua string

	//go:embed rw.lua
	rwLua string
	//go:embed rw_acquire.lua
	rwAcquireLua string
	//go:embed rw_release.lua
	rwReleaseLua string
	//go:embed rw_raise.lua
	rwRaiseLua string
)

// The preludes of the scripts: the fence counter and package redisnode's
// helpers, before a lock's scripts and before a read-write lock's.
var (
	lockLua   = counterLua + redisnode.BaseLua + redisnode.LockLua + commonLua
	sharedLua = counterLua + redisnode.BaseLua + rwLua + redisnode.SharedLua
)

// The scripts of a lock, each its prelude and its own part. A lock's
// lease and a hold's are renewed and refreshed by the same scripts, on
// top of package redisnode's lease.lua. All are immutable once built.
var (
	acquireScript = redisnode.NewScript(lockLua + acquireLua)
	releaseScript = redisnode.NewScript(lockLua + releaseLua)
	raiseScript   = redisnode.NewScript(lockLua + raiseLua)
	ttlScript     = redisnode.NewScript(lockLua + ttlLua)
	forceScript   = redisnode.NewScript(lockLua + forceLua + redisnode.ForceLua)
	renewScript   = redisnode.NewScript(redisnode.LeaseLua + redisnode.RenewLua)
	refreshScript = redisnode.NewScript(redisnode.LeaseLua + refreshLua)
	lapseScript   = redisnode.NewScript(redisnode.LeaseLua + lapseLua)
)

// The scripts of a read-write lock's holds: counter.lua, rw.lua, package
// redisnode's shared.lua (the rules that a single Redis server keeps, on
// each node), and each one's own part.
var (
	rwAcquireScript = redisnode.NewScript(sharedLua + rwAcquireLua)
	rwReleaseScript = redisnode.NewScript(sharedLua + rwReleaseLua)
	rwRaiseScript   = redisnode.NewScript(sharedLua + rwRaiseLua)
	downgradeScript = redisnode.NewScript(sharedLua + redisnode.DowngradeLua)
	rwTTLScript     = redisnode.NewScript(redisnode.SharedTTLLua)
)

// scriptSet are the scripts of one kind of hold that differ between a
// lock and a read-write lock's hold.
type scriptSet struct {
	acquire, release, raise, ttl *redisnode.Script
}

var (
	lockScripts = &scriptSet{acquire: acquireScript, release: releaseScript, raise: raiseScript, ttl: ttlScript}
	rwScripts   = &scriptSet{acquire: rwAcquireScript, release: rwReleaseScript, raise: rwRaiseScript, ttl: rwTTLScript}
)

// Release modes of release.lua and rw_release.lua.
const (
	releasePlain   = "0" // the holder releases
	releaseGiveUp  = "1" // a waiter leaves the queue, and gives back a grant it had
	releaseRequeue = "2" // a waiter gives back what a failed attempt took, and stays queued
)
