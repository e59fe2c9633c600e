package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// The README's quick start is this program, word for word, and it runs.
func TestQuickStart(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, src) {
		t.Error("README.md does not show examples/quickstart/main.go as it is")
	}
	s := redistest.Start(t)
	cmd := exec.Command("go", "run", ".")
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "paying order 42 with fence") {
		t.Fatalf("go run: %v\n%s", err, out)
	}
}
