// Package faults checks dlock's mutual exclusion under faults, the way
// Jepsen checks a lock service: worker processes contend for one key and
// write, with the fence of each hold, to a fenced store that the checker
// runs; a schedule drawn from a seed pauses and kills holders and servers
// meanwhile; and the checker reads the whole history afterwards.
//
// It reports, for one run:
//
//   - Unsafe: writes the store accepted while another hold was in place,
//     the violations of exclusion that fencing did not stop (must be 0);
//   - Fenced: writes the store refused for a fence below one it had
//     accepted: holders that outlived their lease and were stopped by the
//     fence, the honest cost of a backend under a fault;
//   - Regressions: acquisitions whose fence was not above the fence of an
//     acquisition that had ended before they began;
//   - Stuck: Lock calls that took longer than their wait plus the TTL,
//     outside the times their worker was paused;
//   - LateLoss: holds whose Done closed with a loss only after another
//     hold had begun.
//
// Every timestamp comes from CLOCK_MONOTONIC, which all the processes of
// the machine share and which runs on while a process is stopped.
//
// The package is internal to dlock's tests: `make test` runs a short
// seeded run per backend, and `make soak SECONDS=600` a long one (see
// cmd/faultcheck).
package faults
