package election_test

import (
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/redistest"
)

// TestMain starts the redis-server that the Examples use.
func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, nil))
}
