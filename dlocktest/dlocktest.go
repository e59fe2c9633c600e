// Package dlocktest checks that a [dlock.Locker] implementation keeps the
// contract of package dlock, in the manner of nettest.TestConn and
// slogtest.Run: a driver's test calls [Run] with a [Harness], and the suite
// runs every rule as a subtest against the driver's real backend.
//
// # The contract
//
// These are the rules the suite checks; each subtest's name says which.
//
//   - Basic: TryLock on a free key returns a Lock whose Key is the key,
//     whose Token is not empty and whose Err is nil with Done open; TTL
//     reports a positive lease no longer than asked; Unlock closes Done and
//     sets Err to an error matching ErrNotHeld; Lock on a free key succeeds
//     at once.
//   - Busy: TryLock on a key held by another Locker returns an error that
//     matches ErrNotAcquired, is a *NotAcquiredError with the key, and
//     (capability RetryAfter) says how long the holder's lease has left.
//   - Expiry: a lock acquired WithLease(ttl) passes to another Locker
//     once ttl has run out; the first holder's Unlock then matches
//     ErrNotHeld and deletes nothing; with LostSignal its Done closes with
//     an Err matching ErrLockLost; with Fencing the new fence is greater.
//   - WaitLimit and WaitCancel: Lock on a busy key gives up after its
//     WithWait limit (ErrNotAcquired, no ctx error) or when its context
//     ends (ErrNotAcquired and the context's error); WithWait(0) makes one
//     attempt.
//   - WaitHandOver: a waiting Lock acquires the key once its holder
//     releases it.
//   - Lost (needs Harness.Lose): when the server forgets a held lock, Done
//     closes and Err matches ErrLockLost and ErrNotHeld; Unlock then
//     returns an error matching ErrNotHeld.
//   - DoPanic, DoLost, DoClose: dlock.Do releases the lock when fn panics
//     and the panic goes on; when the lock is lost, fn's context ends with a
//     cause matching ErrLockLost and Do's error matches ErrLockLost; when
//     the Locker is closed while fn runs, fn's context ends with a cause
//     matching ErrClosed, and so does Do's error.
//   - Reentrancy (capability Reentrancy): holds for one owner id, on one
//     Locker or several, all succeed; the key stays held until the last of
//     them is released, and other parties meanwhile get ErrNotAcquired.
//   - AlreadyHeld: a Locker that holds a key without owner refuses a second
//     ownerless TryLock or Lock of it with ErrAlreadyHeld, at once.
//   - LockerUnlock: Locker.Unlock releases the Locker's own hold for the
//     owner in ctx (or, when ctx carries none, the most recent hold made
//     with WithOwner) and returns ErrNotHeld when there is none.
//   - Fencing (capability Fencing): fences of one key grow strictly across
//     Lockers and owners.
//   - Refresh: Refresh keeps a held lock and resets its lease; after Unlock
//     it returns an error matching ErrNotHeld.
//   - Close: Close releases every lock the Locker holds (Done closes, other
//     Lockers acquire; Err matches ErrNotHeld and ErrClosed), ends a
//     waiting Lock, and makes TryLock, Lock and Unlock return ErrClosed.
//   - BadInput: an empty key or one over MaxKeyLen bytes gives
//     ErrInvalidKey, WithTTL(0), a negative TTL, one below dlock.MinTTL or
//     Harness.MinTTL gives ErrInvalidTTL, WithWait(-1) or a retry delay
//     over dlock.MaxRetryInterval gives ErrInvalidOption, unlocking twice
//     gives ErrNotHeld; none of these changes anything.
//   - Exclusion: several Lockers, each with goroutines acting for owners
//     of their own, contending for one key never hold it at the same time,
//     though each holder stays inside for milliseconds; with Fencing, the
//     fences grow in the order of the holds.
//   - Fair (capability Fair): waiters acquire in arrival order.
//   - Events: a Locker made with dlock.WithObserver sends its observer, in
//     order and with their fields, an Acquire (acquired, with the hold, its
//     fence, one attempt, the caller's context), Renew events, and a
//     Release; an Acquire busy for TryLock and Lock with WithWait(0); a Wait
//     (unless the first attempt outlasted the wait) and an Acquire timeout
//     for a wait that ran out or whose context ended; a Wait, Wake events,
//     then the Acquire of a waiter that a release (or, where the store does
//     not count waiters, a lease's end) woke; a Lost (needs Harness.Lose)
//     whose Err matches ErrOwnershipLost; a Release whose Err matches
//     ErrClosed for a hold that Close released.
//   - MultiKey: dlock.LockAll over keys that several callers name in
//     opposite orders, under contention, always finishes, and no two
//     holders of a key overlap; TryLockAll on a busy key takes nothing.
//   - Semaphore (capability Semaphore): at most limit permits of a key
//     at once, across Lockers; a release lets a waiter in; a permit whose
//     holder stops renewing comes back after its lease; a lowered limit
//     keeps the holders above it until they release; a bad limit is
//     ErrInvalidOption; dlock.Permits runs dlock.Do under a permit.
//   - RWLock (capability RWLock): readers overlap; a writer excludes
//     readers and writers; once a writer waits, a new reader does not get
//     in; a release wakes the waiting writer; Downgrade keeps the hold and
//     lets readers in; an owner's upgrade gets ErrUpgrade at once.
//
// Every subtest is bounded in time: leases are Harness.MinTTL (or at least
// 100ms), waits have deadlines, and nothing sleeps in place of waiting for
// an event. Subtests run in parallel, each on keys of its own, so one
// backend serves them all.
package dlocktest
