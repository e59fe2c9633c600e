package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md from `dlock help`")

// TestReference: README.md is `dlock help` and the help of every command
// and topic, so the reference has one source. After changing a help text,
// run `go test -run TestReference -update` in cmd/dlock.
func TestReference(t *testing.T) {
	help := func(args ...string) string {
		var out, errs bytes.Buffer
		e := &env{stdout: &out, stderr: &errs, getenv: func(string) string { return "" }}
		if code := dlockMain(e, append([]string{"help"}, args...)); code != exitOK {
			t.Fatalf("dlock help %s: exit %d, stderr %q", strings.Join(args, " "), code, errs.String())
		}
		return out.String()
	}
	var b strings.Builder
	b.WriteString("# The `dlock` command\n\n" +
		"`dlock` is `flock(1)` across machines: it runs a command while holding a\n" +
		"distributed lock in Redis or etcd, so that cron jobs, deploy scripts and\n" +
		"migrations never run twice at once. Install it with\n" +
		"`go install github.com/dlock-go/dlock/cmd/dlock@latest` (a module of its own).\n\n" +
		"This page is generated from `dlock help`, which prints the same text.\n\n")
	section := func(title, text string) {
		b.WriteString("## " + title + "\n\n```text\n" + text + "```\n\n")
	}
	section("dlock help", help())
	for _, c := range commands {
		if c.name != "help" {
			section("dlock "+c.name, help(c.name))
		}
	}
	for _, tp := range topics {
		section("dlock help "+tp.name, help(tp.name))
	}
	want := strings.TrimSuffix(b.String(), "\n")
	if *update {
		if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("README.md differs from `dlock help`: run `go test -run TestReference -update` in cmd/dlock")
	}
}
