package redlock

import (
	"testing"

	"github.com/dlock-go/dlock/dlocktest"
)

// Package election keeps its rules over Redlock on three nodes: Observe
// needs the Locker's Watch, RunOnce the locks' UnlockAfter.
func TestElection(t *testing.T) {
	dlocktest.RunElection(t, harness(shared[:3]))
}
