package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed ttl.lua
	ttlLua string
)

// The scripts. Run sends EVALSHA and falls back to EVAL on NOSCRIPT (after a
// restart, a failover or SCRIPT FLUSH), so the normal case is one round trip.
var (
	acquireScript = redis.NewScript(commonLua + acquireLua)
	releaseScript = redis.NewScript(commonLua + releaseLua)
	refreshScript = redis.NewScript(refreshLua)
	ttlScript     = redis.NewScript(ttlLua)
)

// Attempt modes of acquire.lua.
const (
	modeTry  = 0
	modeFair = 1
	modeWait = 2
)

// Replies of release.lua.
const (
	releaseNotHeld = 0
	releaseDone    = 1
	releaseAgain   = 2
)
