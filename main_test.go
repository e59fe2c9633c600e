package dlock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// TestMain starts the redis-server that the Examples use, and tells them
// where it is as a user's program would learn it: from the environment.
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dlock-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.New(dir, redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	os.Setenv("REDIS_ADDR", srv.Addr())
	return m.Run()
}
