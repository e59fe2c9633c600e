// Package faults checks dlock's mutual exclusion under faults, the way
// Jepsen checks a lock service: worker processes contend for one key and
// write, with the fence of each hold, to a fenced store that the checker
// runs; a schedule drawn from a seed pauses and kills holders and servers
// meanwhile, cuts or slows their network, loses the replies of commands
// that took effect (in front of Redis or PostgreSQL) or delivers commands
// twice (in front of Redis); fails a Sentinel or Cluster master over,
// moves a Cluster slot, cuts a holder off from a majority of Redlock's
// masters, and cuts etcd members apart; and the checker reads the whole
// history afterwards.
//
// The lock store is one redis-server, a Sentinel group (a master, its
// replica, three Sentinels; the workers count a write once the replica
// has it, unless Config.NoAck), a Redis Cluster, Redlock's masters, an
// etcd cluster, or one PostgreSQL server (Config.Backend). The workers take a lock, an election's
// leadership, a RunOnce run, or one of the other primitives
// (Config.Primitive), each with its rule:
//
//   - a lock, a leadership: one hold of the key at a time;
//   - a RunOnce run: one at a time, and none within a run's hold from
//     its call, even when its worker died;
//   - a semaphore's permits (dlock.Semaphore): at most Config.Limit at once;
//   - a read-write lock (dlock.RWLocker): readers beside one another, a
//     writer beside no one; a writer that downgrades is a reader from
//     its Downgrade call on;
//   - LockAll over two or three of four keys: one hold of each key at a
//     time, and no worker stuck.
//
// The store decides each write by its fence, as the storage a primitive
// guards would: a writer's write is refused below any fence accepted on the
// key, a reader's below a writer's; a permit takes one of Limit slots, and
// a newer fence pushes the oldest out of a full store (a permit granted
// after it proves one of their leases ended), whose later writes are then
// refused.
//
// It reports, for one run:
//
//   - Unsafe: pairs of holds that broke the rule where it counts: in the
//     store, accepted writes of a hold between two accepted writes of
//     holds it must not be beside (what fencing did not stop); and in
//     time, a hold granted while holds it must not be beside had leases
//     sure to be valid (each released without error, its worker untouched
//     by faults, its server not restarted empty meanwhile): a grant the
//     primitive should not have made (must be 0);
//   - Fenced: writes the store refused for a stale fence: holders that
//     outlived their lease and were stopped by the fence, the honest cost
//     of a backend under a fault (with permits, the fence cannot tell which
//     lease ended, and the oldest holder's write may be the one refused);
//   - Regressions: acquisitions whose fence was not above the fence of an
//     acquisition of the same key that had ended before they began;
//   - Stuck: Lock calls that took longer than their wait plus the TTL,
//     outside the times their worker was paused, and workers that did not
//     stop by themselves at the end of the run;
//   - LateLoss: holds whose Done closed with a loss only after a hold they
//     must not be beside had begun;
//   - Linearizable: whether the history, read as operations on a fenced
//     lease lock (acquisitions with their fences, renewals, releases,
//     downgrades, losses the server signalled, restarts that lose the
//     server's data), each with its call and return, has an order that the
//     lock allows, each operation taking effect between its call and its
//     return: one holder (or readers, or Limit permits) at a time, fences
//     that only grow, a lease that lasts at least a TTL from the call of a
//     renewal that returned. An operation whose outcome the worker did not
//     learn (a timeout, a lost reply) may have taken effect or not. The
//     search is porcupine's (github.com/anishathalye/porcupine).
//
// Every timestamp comes from CLOCK_MONOTONIC, which all the processes of
// the machine share and which runs on while a process is stopped.
//
// A stall, a time the loaded machine did not run a worker, the harness or
// the etcd servers, does not count against a Lock call's time: each
// process records its own (Report.Stalled sums them).
//
// A run lasts Config.Duration from the time its workers are ready, and
// longer when it must: until its schedule has thrown every fault it names
// once, and its workers have held Workers times (a minute more at most).
//
// The package is internal to dlock's tests: `make test` runs a short
// seeded run per backend and primitive, each as long as its schedule needs
// to throw every fault it names once, side by side; and
// `make soak SECONDS=600` long ones of every mix (see cmd/faultcheck).
package faults
