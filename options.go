package dlock

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults, used when neither the Locker nor the call sets a value, and
// limits.
const (
	DefaultPrefix        = "dlock"
	DefaultTTL           = 10 * time.Second
	DefaultRetryInterval = 100 * time.Millisecond

	// MinTTL is the shortest lease dlock accepts. Drivers may ask for more
	// (etcd leases are whole seconds). A holder counts its lease from the
	// moment before it sent the request, less a margin for the server's
	// clock running fast (1% and 2ms for Redis), so a shorter lease would
	// be over, or nearly, by the time the reply came back: at 10ms about
	// 8ms stay usable on a local network.
	MinTTL = 10 * time.Millisecond
	// MaxKeyLen is the longest key, in bytes, that a Locker accepts.
	MaxKeyLen = 1024
	// MaxLimit is the largest number of permits a semaphore may have.
	MaxLimit = 1 << 20
	// MaxRetryInterval is the longest delay between two attempts that a
	// RetryStrategy may ask for. A waiter that sleeps longer keeps its
	// place in a queue for twice its delay, so a longer delay would hold
	// up the waiters behind a crashed one for hours; to wait that long,
	// bound the wait with WithWait or the context instead.
	MaxRetryInterval = time.Hour
)

// An Option changes how a lock is acquired and held: it writes one
// setting of an [Options]. Options are values: the last one of a kind
// wins, and a value out of range makes the call that received it return
// an error matching ErrInvalidOption or ErrInvalidTTL, changing nothing.
//
// Options given to a driver's constructor become that Locker's defaults;
// options given to a call override them for that call. [WithPrefix] and
// [WithLogger] and [WithObserver] apply to a Locker only.
type Option func(*Options)

// WithTTL sets the lease of an acquisition. With the watchdog on (the
// default) the lock is renewed every ttl/3 and lives as long as it is held;
// with it off the lock expires ttl after acquisition unless refreshed.
func WithTTL(ttl time.Duration) Option {
	return func(o *Options) {
		if ttl < MinTTL {
			o.Reject(fmt.Errorf("%w: %v is below %v", ErrInvalidTTL, ttl, MinTTL))
			return
		}
		o.TTL = ttl
	}
}

// WithAutoRenew turns the watchdog on or off (default on).
func WithAutoRenew(on bool) Option {
	return func(o *Options) { o.AutoRenew = on }
}

// WithLease pins the lease: WithTTL(ttl) with the watchdog off. The lock is
// released by the server ttl after acquisition unless the holder refreshes it.
func WithLease(ttl time.Duration) Option {
	return func(o *Options) {
		WithTTL(ttl)(o)
		o.AutoRenew = false
	}
}

// WithWait bounds how long Lock waits for a busy lock. WithWait(0) makes
// Lock a single attempt, like TryLock. Without WithWait, Lock waits until
// its context ends. TryLock ignores it.
func WithWait(d time.Duration) Option {
	return func(o *Options) {
		if d < 0 {
			o.Reject(fmt.Errorf("%w: negative wait %v", ErrInvalidOption, d))
			return
		}
		o.Wait, o.Waiting = d, true
	}
}

// WithRetry sets the strategy that paces a waiting Lock. With a driver that
// wakes waiters on release, the strategy gives the fallback sleep between
// attempts, in case a wake-up is lost.
func WithRetry(r RetryStrategy) Option {
	return func(o *Options) {
		if err := r.validate(); err != nil {
			o.Reject(err)
			return
		}
		o.Retry = r
	}
}

// WithFair serves the waiters of a key in arrival order, across processes.
// A fair TryLock does not take a free lock while others queue for it.
func WithFair(on bool) Option {
	return func(o *Options) { o.Fair = on }
}

// WithFencing asks for a fencing token with every acquisition (default
// off), which Lock.Fence returns. In Redis it costs a counter per key that
// stays for good, and a script instead of a bare SET NX PX on the
// uncontended path; etcd locks carry one whatever this says.
func WithFencing(on bool) Option {
	return func(o *Options) { o.Fencing = on }
}

// WithNotify turns wake-on-release on or off (default on). Off, a waiting
// Lock polls at the pace of its retry strategy, like a plain SET NX loop.
func WithNotify(on bool) Option {
	return func(o *Options) { o.Notify = on }
}

// WithPrefix sets the namespace at the start of every key the Locker writes
// (default "dlock"). Locker only.
func WithPrefix(prefix string) Option {
	return func(o *Options) {
		o.LockerOnly("WithPrefix")
		if prefix == "" || len(prefix) > 64 {
			o.Reject(fmt.Errorf("%w: prefix must have 1 to 64 bytes", ErrInvalidOption))
			return
		}
		o.Prefix = prefix
	}
}

// WithLogger sends the Locker's logs to l, tagged component=dlock. Without
// it the Locker logs nothing. Locker only.
func WithLogger(l *slog.Logger) Option {
	return func(o *Options) {
		o.LockerOnly("WithLogger")
		if l == nil {
			o.Reject(fmt.Errorf("%w: nil logger", ErrInvalidOption))
			return
		}
		o.Logger = l
	}
}
