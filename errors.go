package dlock

import (
	"errors"
	"strconv"
	"time"
)

// The errors of dlock. Compare with errors.Is: drivers wrap them with the key
// and, where there is one, the cause.
var (
	// ErrNotAcquired reports that someone else holds the lock. It comes as a
	// *NotAcquiredError.
	ErrNotAcquired = errors.New("dlock: not acquired")
	// ErrNotHeld reports that a lock is not held by the caller: it was
	// already released, or it expired or passed to someone else.
	ErrNotHeld = errors.New("dlock: not held")
	// ErrOwnershipLost reports that the server no longer has this lock's
	// token: the lease ran out or somebody deleted the key.
	ErrOwnershipLost = errors.New("dlock: ownership lost")
	// ErrLockLost matches every *LostError: the lock was lost while held.
	ErrLockLost = errors.New("dlock: lock lost")
	// ErrLeaseExpired reports that the local lease deadline passed before a
	// renewal could reach the server.
	ErrLeaseExpired = errors.New("dlock: lease deadline passed")
	// ErrAlreadyHeld reports that the Locker already holds the key without
	// an owner; a second hold would wait on itself.
	ErrAlreadyHeld = errors.New("dlock: already held by this locker")
	// ErrUpgrade reports an owner that holds a read lock and asked for the
	// write lock of the same key: it would wait on itself (see RWLocker).
	ErrUpgrade = errors.New("dlock: cannot upgrade a read lock to a write lock")
	// ErrClosed reports a call on a closed Locker.
	ErrClosed = errors.New("dlock: locker closed")
	// ErrInvalidKey reports an empty key, a key over MaxKeyLen bytes, or a
	// key that the driver's key layout cannot route.
	ErrInvalidKey = errors.New("dlock: invalid key")
	// ErrInvalidTTL reports a TTL that is not positive or below what the
	// backend can express.
	ErrInvalidTTL = errors.New("dlock: invalid ttl")
	// ErrInvalidOption reports an option with a value out of range, or an
	// option given where it does not apply.
	ErrInvalidOption = errors.New("dlock: invalid option")
	// ErrNilClient reports a driver constructed without a client.
	ErrNilClient = errors.New("dlock: nil client")
	// ErrNotTogether is the error of [MultiLocker.TryLockMulti] when it
	// cannot take the keys in one step; [LockAll] then takes them one by
	// one.
	ErrNotTogether = errors.New("dlock: keys cannot be taken together")
)

// NotAcquiredError is the error of an acquisition that did not succeed
// because someone else holds the lock. It matches ErrNotAcquired, and also
// its Err when the wait ended because a context ended.
type NotAcquiredError struct {
	// Key is the key that was asked for.
	Key string
	// RetryAfter is the holder's remaining lease when the server said so,
	// zero when unknown.
	RetryAfter time.Duration
	// Err is why waiting stopped: ctx.Err(); the failure of the last
	// attempt when the wait ended on one (the store could not be reached,
	// the Locker was closed, a lease error); or nil when the lock was busy
	// and the caller did not wait or its wait limit passed.
	Err error
}

func (e *NotAcquiredError) Error() string {
	s := "dlock: " + quoteKey(e.Key) + ": not acquired"
	if e.RetryAfter > 0 {
		s += " (held for another " + e.RetryAfter.String() + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrNotAcquired.
func (e *NotAcquiredError) Is(target error) bool { return target == ErrNotAcquired }

// Unwrap returns the context error that ended the wait, if any.
func (e *NotAcquiredError) Unwrap() error { return e.Err }

// LostError says why a held lock was lost. It matches ErrLockLost and
// ErrNotHeld, and its Err: ErrOwnershipLost when the server no longer had
// the token, or ErrLeaseExpired joined with the error that kept renewal from
// reaching the server.
type LostError struct {
	Key string
	Err error
}

func (e *LostError) Error() string {
	return "dlock: " + quoteKey(e.Key) + ": lock lost: " + trimPrefix(e.Err.Error())
}

// Is reports whether target is ErrLockLost or ErrNotHeld.
func (e *LostError) Is(target error) bool { return target == ErrLockLost || target == ErrNotHeld }

// Unwrap returns the cause of the loss.
func (e *LostError) Unwrap() error { return e.Err }

// KeyError records an error and the key and operation that caused it, in
// the manner of fs.PathError. Every error of a call about one key is a
// *KeyError (or a *NotAcquiredError or *LostError, which carry the key
// too); errors.Is sees through it to the sentinel errors above.
type KeyError struct {
	Op  string // the operation: "lock", "unlock", "refresh", "ttl", ...; may be empty
	Key string // the key the caller gave
	Err error
}

// Error reads "dlock: op "key": err", with a key over 64 bytes cut in its
// middle.
func (e *KeyError) Error() string {
	s := "dlock: "
	if e.Op != "" {
		s += e.Op + " "
	}
	return s + quoteKey(e.Key) + ": " + trimPrefix(e.Err.Error())
}

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }

// quoteKey quotes key for a message, cutting a key over 64 bytes to its
// first 40 and last 16 bytes.
func quoteKey(key string) string {
	if len(key) > 64 {
		key = key[:40] + "…" + key[len(key)-16:]
	}
	return strconv.Quote(key)
}

func trimPrefix(s string) string {
	const p = "dlock: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
