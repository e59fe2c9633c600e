package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// With Redis down, the binary prints dlock's one line and nothing of
// go-redis's own logger (its pool logs each failed dial).
func TestQuietWithRedisDown(t *testing.T) {
	url := "redis://" + closedPort(t)
	for _, args := range [][]string{
		{"status", "--redis", url, "k"},
		{"run", "--redis", url, "--wait", "1s", "k", "--", "true"},
	} {
		res := dlockProc(t, args...)
		if res.code != exitUnavailable || !oneLineWith(res.stderr, "dlock: cannot reach Redis at ") {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and one line", args, res.code, res.stderr, exitUnavailable)
		}
	}
}

// A master name the sentinels do not know: they answered, so the line
// says the name is unknown, not that they are unreachable.
func TestSentinelUnknownMaster(t *testing.T) {
	g := redistest.StartSentinel(t, 1, 1)
	url := "redis+sentinel://" + g.SentinelAddrs()[0] + "?master_name=nope"
	res := dlockIn(t, []string{"status", "--redis", url, "k"})
	want := `dlock: the sentinels at ` + g.SentinelAddrs()[0] + ` know no master named "nope"`
	if res.code != exitConfig || !oneLineWith(res.stderr, want) || strings.Contains(res.stderr, "unreachable") {
		t.Errorf("unknown master name: exit %d, stderr %q; want %d and %q...", res.code, res.stderr, exitConfig, want)
	}
	url = "redis+sentinel://" + g.SentinelAddrs()[0] + "?master_name=" + redistest.MasterName
	if res := dlockIn(t, []string{"status", "--redis", url, "k"}); res.code != 0 {
		t.Errorf("the known master name: exit %d, stderr %q", res.code, res.stderr)
	}
}

// A URL without a scheme lists every scheme --redis takes, and each of
// them is taken.
func TestMissingSchemeListsAll(t *testing.T) {
	t.Parallel() // its own servers, keys or prefix; it waits, not computes
	addr := closedPort(t)
	const quick = "dial_timeout=1s"
	urls := map[string]string{ // a URL of each scheme, of servers that are down
		"redis":           "redis://" + addr + "?" + quick,
		"rediss":          "rediss://" + addr + "?" + quick,
		"unix":            "unix://" + t.TempDir() + "/none.sock?" + quick,
		"redis+sentinel":  "redis+sentinel://" + addr + "?master_name=m&" + quick,
		"rediss+sentinel": "rediss+sentinel://" + addr + "?master_name=m&" + quick,
		"redis+cluster":   "redis+cluster://" + addr + "?" + quick,
		"rediss+cluster":  "rediss+cluster://" + addr + "?" + quick,
		"redis+redlock":   "redis+redlock://" + addr + "?" + quick + "," + addr + "," + addr,
		"rediss+redlock":  "rediss+redlock://" + addr + "?" + quick + "," + addr + "," + addr,
	}
	res := dlockIn(t, []string{"status", "--redis", addr, "k"})
	var listed []string
	for _, m := range regexp.MustCompile(`([a-z+]+)://`).FindAllStringSubmatch(res.stderr, -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for s := range urls {
		want = append(want, s)
	}
	slices.Sort(want)
	slices.Sort(listed)
	if res.code != exitUsage || !strings.Contains(res.stderr, "missing scheme") || !slices.Equal(listed, want) {
		t.Errorf("a URL without a scheme: exit %d, stderr %q; want %d listing %q", res.code, res.stderr, exitUsage, want)
	}
	for s, url := range urls {
		res := dlockIn(t, []string{"status", "--redis", url, "k"})
		if res.code != exitUnavailable || !oneLineWith(res.stderr, "dlock: cannot reach ") {
			t.Errorf("scheme %s (%s): exit %d, stderr %q; want %d and one line: taken, and the server down", s, url, res.code, res.stderr, exitUnavailable)
		}
	}
}

// An unknown command is one line, not the whole help.
func TestUnknownCommand(t *testing.T) {
	res := dlockIn(t, []string{"frobnicate"})
	if want := "dlock: unknown command \"frobnicate\"; run 'dlock help'\n"; res.code != exitUsage || res.stderr != want || res.stdout != "" {
		t.Errorf("unknown command: exit %d, stdout %q, stderr %q; want %d and %q", res.code, res.stdout, res.stderr, exitUsage, want)
	}
}

// The demo tells one story: its third worker is paused, not dead, so its
// late write can be refused. Neither the demo nor its help says it died.
func TestDemoStory(t *testing.T) {
	t.Parallel()                        // its own servers, keys or prefix; it waits, not computes
	res := dlockIn(t, []string{"demo"}) // on redis-server; the story is the same on the stand-in (see TestDemo)
	help := dlockIn(t, []string{"help", "demo"})
	top := dlockIn(t, []string{"help"})
	for _, out := range []string{res.stdout, help.stdout, top.stdout} {
		if m := regexp.MustCompile(`(?i)crash|dies|died|dead`).FindString(out); m != "" {
			t.Errorf("the demo's story says %q:\n%s", m, out)
		}
	}
	for _, want := range []string{"PAUSED holding fence", "the paused holder's lease ran out", "wakes up", "REFUSED by the store", "stale write refused: true"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, res.stdout)
		}
	}
	if res.code != 0 {
		t.Errorf("demo: exit %d, stderr %q", res.code, res.stderr)
	}
}
