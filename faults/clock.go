package faults

import "golang.org/x/sys/unix"

// now returns CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the machine, which keeps running while a process is stopped (Go's
// own monotonic reading is per process).
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("CLOCK_MONOTONIC: " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
