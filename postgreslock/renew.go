package postgreslock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// renew renews a batch of leases in one statement: an UPDATE joined with
// unnest of the names, tokens and TTLs. A renewal keyed by token is safe
// to send again, so a lost reply loses nothing: the watchdog tries again
// until the lease's local deadline. A hold whose row is gone is lost.
//
// Renewals commit durably (the server's synchronous_commit, never turned
// off here, unlike a release's): the holder counts its lease from a
// renewal's reply, so a renewal that a crash lost would leave it believing
// in a lease the server forgot, while another takes the lock.
func (l *Locker) renew(ctx context.Context, batch []driver.Renewal[*hold]) []error {
	names := make([]string, len(batch))
	tokens := make([]string, len(batch))
	ttls := make([]int64, len(batch))
	for i, r := range batch {
		names[i], tokens[i], ttls[i] = r.Lock.name, r.Lock.token, r.TTL.Milliseconds()
	}
	errs := make([]error, len(batch))
	rows, err := l.pool.Query(ctx, l.sql.renew, names, tokens, ttls)
	type nt struct{ name, token string }
	renewed := make(map[nt]bool, len(batch))
	if err == nil {
		var n nt
		_, err = pgx.ForEachRow(rows, []any{&n.name, &n.token}, func() error {
			renewed[n] = true
			return nil
		})
	}
	for i, r := range batch {
		switch {
		case err != nil:
			errs[i] = err
		case !renewed[nt{r.Lock.name, r.Lock.token}]:
			errs[i] = fmt.Errorf("%w: the row of the hold was gone", dlock.ErrOwnershipLost)
		}
	}
	return errs
}
