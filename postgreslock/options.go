package postgreslock

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// settings are what this driver's own options set.
type settings struct {
	table  string          // "": DefaultTable
	listen *pgx.ConnConfig // nil: the pool's connection configuration
}

// String names the options that set s.
func (s settings) String() string {
	var set []string
	if s.table != "" {
		set = append(set, fmt.Sprintf("postgreslock.WithTable(%q)", s.table))
	}
	if s.listen != nil {
		set = append(set, "postgreslock.WithListen")
	}
	return strings.Join(set, ", ")
}

// WithTable names the lease table, "dlock" without it ([DefaultTable]);
// the other objects are named after it (see [Schema]). Lower-case
// letters, digits and underscores, optionally as schema.table; another
// name makes New return an error matching dlock.ErrInvalidOption. Locker
// only.
func WithTable(name string) dlock.Option {
	return func(o *dlock.Options) {
		o.LockerOnly("postgreslock.WithTable")
		if err := checkTable(name); err != nil {
			o.Reject(err)
			return
		}
		driver.SetOwn(o, func(s *settings) { s.table = name })
	}
}

// WithListen gives the connection of the Locker's one LISTEN session,
// which wakes waiters on a release. Without it the session uses a copy of
// the pool's connection configuration: give a direct connection to the
// server here when the pool goes through a pooler in transaction mode, or
// turn notifications off with dlock.WithNotify(false), and waiters poll.
// A nil cfg makes New return an error matching dlock.ErrInvalidOption.
// Locker only.
func WithListen(cfg *pgx.ConnConfig) dlock.Option {
	return func(o *dlock.Options) {
		o.LockerOnly("postgreslock.WithListen")
		if cfg == nil {
			o.Reject(fmt.Errorf("%w: postgreslock.WithListen(nil)", dlock.ErrInvalidOption))
			return
		}
		driver.SetOwn(o, func(s *settings) { s.listen = cfg })
	}
}
