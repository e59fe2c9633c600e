package election_test

import (
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// server is the redis-server of the tests and Examples; TestMain starts it.
var server *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) { server = s }))
}
