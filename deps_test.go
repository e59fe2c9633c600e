package dlock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the dependency policy: a program that imports only
// dlock and redislock pulls in neither gRPC nor etcd, and dlock and its
// driver layer import only the standard library (and each other).
func TestDependencies(t *testing.T) {
	list := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, dep := range list("github.com/dlock-go/dlock/redislock") {
		for _, banned := range []string{"google.golang.org/grpc", "go.etcd.io/", "github.com/bsm/", "github.com/go-redsync/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("redislock depends on %s", dep)
			}
		}
	}
	own := map[string]bool{
		"github.com/dlock-go/dlock":                   true,
		"github.com/dlock-go/dlock/driver":            true,
		"github.com/dlock-go/dlock/internal/settings": true,
		"github.com/dlock-go/dlock/observe":           true,
		"github.com/dlock-go/dlock/keytmpl":           true,
		"github.com/dlock-go/dlock/election":          true,
	}
	for pkg := range own {
		for _, dep := range list(pkg) {
			if !own[dep] {
				t.Errorf("%s imports %s, beyond the standard library", pkg, dep)
			}
		}
	}
}
