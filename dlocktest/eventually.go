package dlocktest

import (
	"testing"
	"time"
)

// Eventually checks cond every 10ms until it holds, and fails t when it
// still does not after d: the way a test waits for a condition, with a
// deadline, instead of sleeping for a guessed time.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // the poll interval, bounded by the deadline
	}
}
