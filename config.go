package dlock

import (
	"log/slog"
	"time"
)

// Config is a Locker's configuration in four fields, for values that come
// from flags or files. A zero field falls back to dlock's default; a
// value out of range makes the driver's constructor fail.
//
//	locker, err := redislock.New(rdb, cfg.Options()...)
type Config struct {
	// Prefix starts every key the Locker writes. Default "dlock".
	Prefix string
	// DefaultTTL is the lease of an acquisition that sets none. Default 10s.
	DefaultTTL time.Duration
	// RetryInterval is the pause between the attempts of a waiting Lock.
	// Default 100ms.
	RetryInterval time.Duration
	// Logger receives the Locker's logs. Default: none.
	Logger *slog.Logger
}

// Options returns the options that configure a Locker as c says.
func (c Config) Options() []Option {
	var opts []Option
	if c.Prefix != "" {
		opts = append(opts, WithPrefix(c.Prefix))
	}
	if c.DefaultTTL != 0 {
		opts = append(opts, WithTTL(c.DefaultTTL))
	}
	if c.RetryInterval != 0 {
		opts = append(opts, WithRetry(FixedInterval(c.RetryInterval)))
	}
	if c.Logger != nil {
		opts = append(opts, WithLogger(c.Logger))
	}
	return opts
}
