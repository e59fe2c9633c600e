package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryDependencies: the dlock binary links neither the testing
// package nor the etcd server, which only the tests need.
func TestBinaryDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "testing" || strings.HasPrefix(dep, "testing/") || strings.HasPrefix(dep, "go.etcd.io/etcd/server/") {
			t.Errorf("the dlock binary links %s", dep)
		}
	}
}
