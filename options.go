package dlock

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults used when neither the Locker nor the call sets a value.
const (
	DefaultPrefix        = "dlock"
	DefaultTTL           = 10 * time.Second
	DefaultRetryInterval = 100 * time.Millisecond
)

// MinTTL is the shortest lease dlock accepts. Drivers may ask for more
// (etcd leases are whole seconds). A holder counts its lease from the
// moment before it sent the request, less a margin for the server's clock
// running fast (1% and 2ms for Redis), so a shorter lease would be over,
// or nearly, by the time the reply came back: at 10ms about 8ms stay
// usable on a local network.
const MinTTL = 10 * time.Millisecond

// An Option changes how a lock is acquired and held. Options are values:
// the last one of a kind wins, and a value out of range makes the call that
// received it return an error matching ErrInvalidOption or ErrInvalidTTL,
// changing nothing.
//
// Options given to a driver's constructor become that Locker's defaults;
// options given to a call override them for that call. [WithPrefix] and
// [WithLogger] apply to a Locker only.
type Option func(*Options)

// Options is the resolved set of options. Drivers read it; callers build it
// with Option values.
type Options struct {
	// TTL is the lease of an acquisition. Default DefaultTTL.
	TTL time.Duration
	// AutoRenew keeps a held lock alive in the background until it is
	// released. Default true.
	AutoRenew bool
	// Wait bounds how long Lock waits; Waiting says whether it was set.
	// When it was not, Lock waits until its context ends.
	Wait    time.Duration
	Waiting bool
	// Retry paces the attempts of a waiting Lock.
	Retry RetryStrategy
	// Owner makes acquisitions reentrant for one owner identity.
	Owner string
	// Fair serves waiters in arrival order.
	Fair bool
	// Fencing asks for a fencing token with every acquisition. Default
	// false: drivers that pay for a fence (Redis keeps a counter per key)
	// hand one out only when asked; drivers that get one for free (etcd's
	// revisions) always do.
	Fencing bool
	// Notify wakes waiters when the lock is released, where the driver can.
	// Default true; without it waiters poll at the Retry pace.
	Notify bool
	// Prefix starts every key the Locker writes. Locker only.
	Prefix string
	// Logger receives the Locker's structured logs. Locker only.
	Logger *slog.Logger

	lockerOnly []string
	invalid    []error
}

// WithTTL sets the lease of an acquisition. With the watchdog on (the
// default) the lock is renewed every ttl/3 and lives as long as it is held;
// with it off the lock expires ttl after acquisition unless refreshed.
func WithTTL(ttl time.Duration) Option {
	return func(o *Options) {
		if ttl < MinTTL {
			o.invalid = append(o.invalid, fmt.Errorf("%w: %v is below %v", ErrInvalidTTL, ttl, MinTTL))
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
			o.invalid = append(o.invalid, fmt.Errorf("%w: negative wait %v", ErrInvalidOption, d))
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
			o.invalid = append(o.invalid, err)
			return
		}
		o.Retry = r
	}
}

// WithOwnerID makes the acquisition reentrant for owner id: it overrides the
// owner that ctx carries (see [WithOwner]). An empty id means no owner.
func WithOwnerID(id string) Option {
	return func(o *Options) {
		if len(id) > MaxKeyLen {
			o.invalid = append(o.invalid, fmt.Errorf("%w: owner id over %d bytes", ErrInvalidOption, MaxKeyLen))
			return
		}
		o.Owner = id
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
		o.lockerOnly = append(o.lockerOnly, "WithPrefix")
		if prefix == "" || len(prefix) > 64 {
			o.invalid = append(o.invalid, fmt.Errorf("%w: prefix must have 1 to 64 bytes", ErrInvalidOption))
			return
		}
		o.Prefix = prefix
	}
}

// WithLogger sends the Locker's logs to l, tagged component=dlock. Without
// it the Locker logs nothing. Locker only.
func WithLogger(l *slog.Logger) Option {
	return func(o *Options) {
		o.lockerOnly = append(o.lockerOnly, "WithLogger")
		if l == nil {
			o.invalid = append(o.invalid, fmt.Errorf("%w: nil logger", ErrInvalidOption))
			return
		}
		o.Logger = l
	}
}

// NewOptions resolves the options of a Locker over dlock's defaults. Drivers
// call it in their constructors.
func NewOptions(opts ...Option) (Options, error) {
	o := Options{
		TTL:       DefaultTTL,
		AutoRenew: true,
		Notify:    true,
		Retry:     FixedInterval(DefaultRetryInterval),
		Prefix:    DefaultPrefix,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.check(); err != nil {
		return Options{}, err
	}
	o.lockerOnly = nil
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("component", "dlock")
	return o, nil
}

// Apply resolves the options of one call over the Locker's options o.
// It returns an error when an option is out of range or applies to a Locker
// only.
func (o Options) Apply(opts ...Option) (Options, error) {
	if len(opts) == 0 {
		return o, nil
	}
	return o.apply(opts)
}

// apply is Apply with options. It is apart so that o escapes to the heap
// (an option takes its address) only when there are options.
func (o Options) apply(opts []Option) (Options, error) {
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if len(o.lockerOnly) > 0 {
		return Options{}, fmt.Errorf("%w: %s applies to a Locker, not to one call", ErrInvalidOption, o.lockerOnly[0])
	}
	return o, o.check()
}

func (o *Options) check() error {
	if len(o.invalid) > 0 {
		return o.invalid[0]
	}
	return nil
}
