package rediswait

import "time"

// A queued waiter's place decides how often it comes back. The first two
// waiters of a queue attempt at the pace of their delay, so that a holder
// that crashed or a grant whose message was lost is noticed as soon as
// before. A waiter further back is handed the lock by a release long
// before it could matter that it sleeps longer: it sleeps its delay times
// its place (one for the first two), at most MaxStretch times, and its
// queue entry lasts as much longer (see the lock scripts' enqueue). The
// attempts a queue makes while the lock is held then grow with the
// logarithm of its length, up to a few dozen waiters, not with every
// waiter at the pace of its delay.

// MaxStretch is how many times its delay a queued waiter of a lock of
// ttl may sleep: no longer than a quarter of the TTL, and at most 64
// times. Its claim window, twice its sleep and a quarter second, then
// stays within the TTL: a waiter that hangs at the head of the queue, to
// which a release grants the lock for its claim window, holds the queue
// up no longer than a holder that hangs (the TTL).
func MaxStretch(delay, ttl time.Duration) int64 {
	if delay <= 0 {
		return 1
	}
	return max(1, min(64, int64(ttl/4/delay)))
}

// StretchShift places, in a busy reply of the lock scripts (-1 - the
// holder's PTTL), the stretch the script gave the waiter's entry, less
// one, above the PTTL: the reply is -1 - (PTTL + (stretch-1) << StretchShift).
// A PTTL is below 1<<40 ms (34 years).
const StretchShift = 40

// Busy splits a busy reply r (< 0) of a lock script into the holder's
// remaining lease and the stretch of the waiter's entry (1 when the
// attempt did not queue, or was not stretched).
func Busy(r int64) (lease time.Duration, stretch int64) {
	b := -1 - r
	return time.Duration(b&(1<<StretchShift-1)) * time.Millisecond, b>>StretchShift + 1
}
