//go:build !race

package faults

// raceEnabled says that the test binary runs with the race detector.
const raceEnabled = false
