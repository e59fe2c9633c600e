package dlock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the dependency policy: a program that imports only
// dlock and redislock pulls in neither gRPC nor etcd, and dlock itself
// imports only the standard library.
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
	for _, pkg := range []string{"github.com/dlock-go/dlock", "github.com/dlock-go/dlock/keytmpl"} {
		if deps := list(pkg); len(deps) != 1 || deps[0] != pkg {
			t.Errorf("%s imports more than the standard library: %v", pkg, deps)
		}
	}
}
