package main

import (
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The demo runs to completion on a redis-server of its own, or on its
// stand-in when there is none, shows what it promises, and stops the
// server it started.
func TestDemo(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		first      *regexp.Regexp
	}{
		{"redis-server", os.Getenv("PATH"), regexp.MustCompile(`^dlock demo: started redis-server \S+ on (127\.0\.0\.1:\d+);`)},
		{"stand-in", "", regexp.MustCompile(`^dlock demo: redis-server is not on PATH: using an in-process Redis stand-in \(miniredis\) on (127\.0\.0\.1:\d+);`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			start := time.Now()
			res := dlockIn(t, []string{"demo"})
			if res.code != 0 {
				t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("demo took %v, over its 30s budget", d)
			}
			m := tc.first.FindStringSubmatch(res.stdout)
			if m == nil {
				t.Fatalf("demo's first line does not say which server it started:\n%s", res.stdout)
			}
			for _, want := range []string{
				"hand-off from worker-",
				"PAUSED holding fence",
				"the paused holder's lease ran out",
				"REFUSED by the store",
				"strictly rising: true",
				"two holders at once: 0 times",
				"stale write refused: true",
			} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("demo output lacks %q:\n%s", want, res.stdout)
				}
			}
			if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
				c.Close()
				t.Errorf("the demo's server on %s still accepts connections", m[1])
			}
		})
	}
}
