//go:build !race

package postgreslock_test

// raceEnabled says that the test binary runs with the race detector.
const raceEnabled = false
