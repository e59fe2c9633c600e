package redlock

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/internal/redisnode"
)

// Every composed script compiles on a real server (SCRIPT LOAD): a syntax
// error in a part shows here, not on the first call whose path needs the
// script.
func TestScriptsLoad(t *testing.T) {
	c := clients(t, shared[:1])[0]
	for name, s := range map[string]*redisnode.Script{
		"acquire": acquireScript, "release": releaseScript, "raise": raiseScript, "ttl": ttlScript,
		"force": forceScript, "renew": renewScript, "refresh": refreshScript, "lapse": lapseScript,
		"rw_acquire": rwAcquireScript, "rw_release": rwReleaseScript, "rw_raise": rwRaiseScript,
		"downgrade": downgradeScript, "rw_ttl": rwTTLScript,
	} {
		if err := s.Load(context.Background(), c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
