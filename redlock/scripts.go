package redlock

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
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
	acquireScript = newScript(commonLua + acquireLua)
	releaseScript = newScript(commonLua + releaseLua)
	raiseScript   = newScript(commonLua + raiseLua)
	renewScript   = newScript(commonLua + renewLua)
	refreshScript = newScript(commonLua + refreshLua)
	ttlScript     = newScript(commonLua + ttlLua)
	forceScript   = newScript(commonLua + forceLua)
)

// Release modes of release.lua.
const (
	releasePlain   = "0" // the holder releases
	releaseGiveUp  = "1" // a waiter leaves the queue, and gives back a grant it had
	releaseRequeue = "2" // a waiter gives back what a failed attempt took, and stays queued
)

// script is a Lua script sent by its SHA1, with EVAL on NOSCRIPT.
type script struct {
	src  string
	hash string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(sum[:])}
}

// run sends EVALSHA and, on NOSCRIPT (a node restarted, or SCRIPT
// FLUSH), the same call as EVAL: one round trip in the normal case.
func (s *script) run(ctx context.Context, c redis.UniversalClient, keys []any, args ...any) *redis.Cmd {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	r := c.Do(ctx, cmd...)
	if isNoScript(r.Err()) {
		cmd[0], cmd[1] = "eval", s.src
		r = c.Do(ctx, cmd...)
	}
	return r
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
