package postgreslock

import (
	"context"

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
		names[i], tokens[i], ttls[i] = r.Lock.name, r.Lock.Token(), r.TTL.Milliseconds()
	}
	errs := make([]error, len(batch))
	rows, err := l.pool.Query(ctx, l.sql.renew, l.renewMode(names, tokens, ttls)...)
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
		case !renewed[nt{r.Lock.name, r.Lock.Token()}]:
			errs[i] = errHoldGone
		}
	}
	return errs
}

// renewMode returns the renewal's arguments, after a query mode that has
// the server plan it for this batch when the pool's mode would run it as
// a statement prepared once per connection. The plan cache of a prepared
// statement settles on a generic plan after five runs, and a generic
// plan guesses 10 rows for the unnest of its arrays: with statistics
// taken while the table held nothing, it joins by scanning the holds and,
// for each, the whole batch again (1,000 held locks cost a server core
// about 140 ms a tick). Planned with the arrays it is given, the server
// knows the batch's size and picks a join that reads each side once; the
// planning costs a fraction of a millisecond, once a tick. The pool's
// other modes (exec, simple protocol, which a pooler may need) plan every
// statement for its arguments already, and are kept.
func (l *Locker) renewMode(args ...any) []any {
	switch l.pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		return append([]any{pgx.QueryExecModeExec}, args...)
	}
	return args
}
