package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// A wrong password or a database that does not exist is not "cannot
// reach": Redis answered, and said no. The first is an authentication
// error (exit 77), the second a configuration error (exit 78).
func TestRedisAuthAndConfigErrors(t *testing.T) {
	locked := redistest.StartConfig(t, redistest.Config{Password: "s3cret"})
	for _, tc := range []struct {
		url  string
		code int
		say  string
	}{
		{"redis://:wrong@" + locked.Addr(), exitNoPerm, "refused the login"},
		{"redis://" + locked.Addr(), exitNoPerm, "refused the login"},
		{"redis://" + srv.Addr() + "/99", exitConfig, "refused the configuration"},
	} {
		for _, args := range [][]string{{"status", "--redis", tc.url, "k"}, {"run", "--redis", tc.url, "k", "--", "true"}} {
			res := dlockIn(t, args)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.say) || strings.Contains(res.stderr, "s3cret") {
				t.Errorf("dlock %q: exit %d, stderr %q; want exit %d saying %q", args, res.code, res.stderr, tc.code, tc.say)
			}
		}
	}
	if res := dlockIn(t, []string{"status", "--redis", "redis://:s3cret@" + locked.Addr(), "k"}); res.code != 0 {
		t.Fatalf("the right password: exit %d, %s", res.code, res.stderr)
	}
}
