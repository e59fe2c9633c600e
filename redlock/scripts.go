package redlock

import (
	_ "embed"

	"github.com/dlock-go/dlock/internal/redisnode"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed raise.lua
	raiseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed ttl.lua
	ttlLua string
	//go:embed force.lua
	forceLua string
)

// The scripts, each common.lua and its own part, immutable once built.
var (
	acquireScript = redisnode.NewScript(commonLua + acquireLua)
	releaseScript = redisnode.NewScript(commonLua + releaseLua)
	raiseScript   = redisnode.NewScript(commonLua + raiseLua)
	renewScript   = redisnode.NewScript(commonLua + renewLua)
	refreshScript = redisnode.NewScript(commonLua + refreshLua)
	ttlScript     = redisnode.NewScript(commonLua + ttlLua)
	forceScript   = redisnode.NewScript(commonLua + forceLua)
)

// Release modes of release.lua.
const (
	releasePlain   = "0" // the holder releases
	releaseGiveUp  = "1" // a waiter leaves the queue, and gives back a grant it had
	releaseRequeue = "2" // a waiter gives back what a failed attempt took, and stays queued
)
