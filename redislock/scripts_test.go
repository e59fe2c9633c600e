package redislock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/internal/redisnode"
)

// Every composed script compiles on a real server (SCRIPT LOAD): a syntax
// error in a prelude shows here, not on the first lock whose path needs
// the script. (A call of a helper that the prelude lacks is a run-time
// error, which the tests of each path catch.)
func TestScriptsLoad(t *testing.T) {
	c := shared.Client(t)
	for name, s := range map[string]*redisnode.Script{
		"try": tryScript, "acquire": acquireScript, "release": releaseScript,
		"refresh": refreshScript, "lapse": lapseScript, "renew": renewScript, "renew_plain": renewPlain, "ttl": ttlScript, "force": forceScript,
	} {
		if err := s.Load(context.Background(), c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
