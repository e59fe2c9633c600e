package httplock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "httplock-redis-")
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
	os.Setenv("REDIS_ADDR", srv.Addr()) // where the Example finds its server
	return m.Run()
}
