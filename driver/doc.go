// Package driver is what a dlock driver is built from. Users of dlock never
// import it: they hold a dlock.Locker and pass dlock.Option values. A
// driver (redislock, etcdlock, or one of your own) imports it to resolve
// those options, validate keys, and keep its holds with the machinery every
// driver shares:
//
//   - [Hold]: the life of one acquisition (held, then released or lost,
//     once), with Done and Err, and the error rules of dlock.Lock;
//   - [Table]: the holds a Locker has, by key and owner, with the rules of
//     reentrancy, ErrAlreadyHeld, Locker.Unlock and Close;
//   - [Drift]: the local end of a lease, counted from before the request
//     that set it, less a margin for the server's clock;
//   - the events of dlock.WithObserver: the Table fires them, from one call
//     per event site of the driver (see [Table.Observe]);
//   - [NewOptions], [NewBackoff], and a driver's own options ([SetOwn],
//     [Own]);
//   - the optional capabilities a driver declares: [Watcher], [Lapser],
//     [Downgrader], [MultiLocker], [KindInspector].
//
// It is a package of its own, on the model of database/sql/driver, so that
// `go doc dlock` shows the user's vocabulary and nothing of the contract
// between dlock and its drivers. A driver keeps only its backend's I/O:
// what it sends, and what a reply (or its absence) means for the lease.
package driver
