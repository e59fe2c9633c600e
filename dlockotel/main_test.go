package dlockotel_test

import (
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// shared is the redis-server of the tests and the Examples.
var shared *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) { shared = s }))
}
