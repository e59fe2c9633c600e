package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The habits of flock(1), consul lock and etcdctl lock: flags after KEY,
// global flags before the command, every duration in the same forms,
// -n and -w, --json that stays JSON on errors, and help that writes
// --flag.
func TestCLIHabits(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t)
	lk, err := l.TryLock(ctx, "habits")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)

	for _, args := range [][]string{
		{"status", "habits", "--json"},                                   // a flag after KEY
		{"--redis", redisURL(), "status", "habits", "--json"},            // a global flag before the command
		{"--redis=" + redisURL(), "--json", "status", "habits"},          // both global
		{"--prefix", "dlock", "status", "--redis", redisURL(), "habits"}, // mixed
	} {
		res := dlockIn(t, args)
		if res.code != 0 || !strings.Contains(res.stdout, "habits") {
			t.Errorf("dlock %q: exit %d, stdout %q, stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}

	// The same duration forms everywhere; -n and -w as in flock(1).
	for _, args := range [][]string{
		{"run", "--ttl", "5", "--wait", "0.2", "habits", "--", "true"},
		{"run", "--ttl", "1.5", "--kill-grace", "2", "-w", "0.2", "habits", "--", "true"},
		{"run", "-n", "habits", "--", "true"},
	} {
		if res := dlockIn(t, args); res.code != exitBusy {
			t.Errorf("dlock %q: exit %d (stderr %q), want %d: busy after the wait", args, res.code, res.stderr, exitBusy)
		}
	}
	if res := dlockIn(t, []string{"run", "--ttl", "soon", "k", "--", "true"}); res.code != exitUsage || !strings.Contains(res.stderr, "number of seconds") {
		t.Errorf("--ttl soon: exit %d, %q", res.code, res.stderr)
	}

	// --json stays JSON on errors: a usage error and an unreachable server.
	for _, args := range [][]string{
		{"status", "--json"},
		{"status", "--json", "--redis", "redis://127.0.0.1:1", "k"},
		{"unlock", "--json", "nobody-holds-this"},
	} {
		res := dlockIn(t, args)
		var out struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out.Error == "" || out.ExitCode != res.code || res.code == 0 {
			t.Errorf("dlock %q: exit %d, stdout %q: want a JSON error with the exit code", args, res.code, res.stdout)
		}
	}

	// Help writes long flags with two dashes, as the README does.
	res := dlockIn(t, []string{"help", "run"})
	if !strings.Contains(res.stdout, "  --ttl duration") || strings.Contains(res.stdout, "\n  -ttl") || !strings.Contains(res.stdout, "\n  -n\n") {
		t.Errorf("help run lists its flags as:\n%s", res.stdout[strings.Index(res.stdout, "Flags:"):])
	}
}
