package redislock

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed common.lua
	commonLua string
	//go:embed try.lua
	tryLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release_head.lua
	releaseHeadLua string
	//go:embed release.lua
	releaseLua string
	//go:embed lease.lua
	leaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed renew.lua
	renewLua string
	//go:embed ttl.lua
	ttlLua string
)

// The scripts, immutable once built.
var (
	tryScript     = newScript(preludeLua + tryLua)
	acquireScript = newScript(preludeLua + commonLua + acquireLua)
	releaseScript = newScript(releaseHeadLua + preludeLua + commonLua + releaseLua)
	refreshScript = newScript(leaseLua + refreshLua)
	renewScript   = newScript(leaseLua + renewLua)
	ttlScript     = newScript(leaseLua + ttlLua)
)

// attemptMode says how acquire.lua attempts: a set of bit flags.
type attemptMode uint8

// The attempt modes.
const (
	modeTry  attemptMode = 0      // one attempt: take the lock if it is free
	modeFair attemptMode = 1 << 0 // not while a live waiter queues ahead
	modeWait attemptMode = 1 << 1 // when busy, join the queue
)

// Replies of release.lua.
const (
	releaseTaken = -1 // another party holds the lock
	releaseGone  = 0  // the hold is gone: released before, or deleted
	releaseDone  = 1
)

// script is a Lua script sent by its SHA1. Its arguments are built by hand,
// from values boxed once per lock, so that a call costs the fewest
// allocations the client allows.
type script struct {
	src  string
	hash any // the hex SHA1, boxed once
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(sum[:])}
}

// args builds "EVALSHA hash numkeys keys... args...".
func (s *script) args(keys []any, args ...any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

// run sends EVALSHA and, on NOSCRIPT (after a restart, a failover or
// SCRIPT FLUSH), the same call as EVAL: one round trip in the normal case.
func (s *script) run(ctx context.Context, p processor, keys []any, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, s.args(keys, args...)...)
	_ = p.Process(ctx, cmd) // the error is cmd's
	if isNoScript(cmd.Err()) {
		eval := cmd.Args()
		eval[0], eval[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, eval...)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// load puts the script in the server's cache.
func (s *script) load(ctx context.Context, c redis.Scripter) error {
	return c.ScriptLoad(ctx, s.src).Err()
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
