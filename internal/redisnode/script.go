package redisnode

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script sent by its SHA1. Its arguments are built by
// hand, from values boxed once per lock, so that a call costs the fewest
// allocations the client allows.
type Script struct {
	src  string
	hash any // the hex SHA1, boxed once
}

// NewScript returns the script of src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(sum[:])}
}

// Args builds "EVALSHA hash numkeys keys... args...".
func (s *Script) Args(keys []any, args ...any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

// AppendCall appends "EVALSHA hash numkeys" to dst, for a caller that
// builds the keys and arguments after it, in a buffer of its own, and
// sends the command with RunCall.
func (s *Script) AppendCall(dst []any, numkeys int) []any {
	return append(dst, "evalsha", s.hash, numkeys)
}

// Run sends EVALSHA and, on NOSCRIPT (after a restart, a failover or
// SCRIPT FLUSH), the same call as EVAL: one round trip in the normal case.
func (s *Script) Run(ctx context.Context, p Processor, keys []any, args ...any) *redis.Cmd {
	return s.RunCall(ctx, p, s.Args(keys, args...))
}

// RunCall is Run with the command built by AppendCall. call is sent as
// it is, and changed to EVAL on NOSCRIPT: the caller may reuse it once
// RunCall returns.
func (s *Script) RunCall(ctx context.Context, p Processor, call []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, call...)
	_ = p.Process(ctx, cmd) // the error is cmd's
	if IsNoScript(cmd.Err()) {
		eval := cmd.Args()
		eval[0], eval[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, eval...)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// Runs reports whether cmd runs the script, by EVALSHA or EVAL.
func (s *Script) Runs(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 1 && (args[1] == s.hash || args[1] == s.src)
}

// Load puts the script in the server's cache.
func (s *Script) Load(ctx context.Context, c redis.Scripter) error {
	return c.ScriptLoad(ctx, s.src).Err()
}

// IsNoScript reports whether err is Redis's NOSCRIPT: the script is not
// in the server's cache.
func IsNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
