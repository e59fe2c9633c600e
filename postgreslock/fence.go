package postgreslock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"math"

	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// ErrFenceStale is the error of [CheckFence] and [CheckFenceSQL] when the
// hold with the given fence is no longer there: its lease ran out and
// someone else took the lock, or it was released. The transaction must
// not commit the writes the lock guards.
var ErrFenceStale = errors.New("postgreslock: stale fence: the lock was taken over or released")

// fenceSQL finds the hold of a name with a fence, in the name's row or
// the holds table, and locks that row FOR SHARE until the end of the
// transaction: an acquisition that would take the lock over must change
// the name's row (or delete the hold's), so it waits for the transaction
// to end.
func fenceSQL(table string) string {
	return `SELECT 1 FROM (SELECT 1 FROM ` + table + ` WHERE name = $1 AND hold_fence = $2 AND token <> '' FOR SHARE) AS r
UNION ALL SELECT 1 FROM (SELECT 1 FROM ` + table + `_holds WHERE name = $1 AND fence = $2 FOR SHARE) AS h`
}

// CheckFence checks, inside the caller's transaction tx, that the hold of
// key's lock with the given fence (its Lock.Fence) is still there, and keeps it there until tx ends: so a
// holder that paused past its lease cannot commit writes to this database
// once someone else has the lock. Call it in the transaction that makes
// the writes the lock guards, before they commit; it returns an error
// matching ErrFenceStale when the hold is gone, and then tx must roll
// back. While tx lasts, no other party can take the lock, even once the
// lease ran out: keep such transactions short.
//
// The check is one statement on the database that holds the lock tables;
// it needs no round trip of its own when batched with the writes.
func (l *Locker) CheckFence(ctx context.Context, tx pgx.Tx, key string, fence uint64) error {
	if err := checkFenceArgs(key, fence); err != nil {
		return err
	}
	var one int
	err := tx.QueryRow(ctx, fenceSQL(l.table), l.NameOf(key), int64(fence)).Scan(&one)
	return fenceResult(key, fence, err, errors.Is(err, pgx.ErrNoRows))
}

// CheckFenceSQL is CheckFence for a database/sql transaction (over pgx's
// stdlib driver, lib/pq or any driver that takes $1 placeholders).
func (l *Locker) CheckFenceSQL(ctx context.Context, tx *sql.Tx, key string, fence uint64) error {
	if err := checkFenceArgs(key, fence); err != nil {
		return err
	}
	var one int
	err := tx.QueryRowContext(ctx, fenceSQL(l.table), l.NameOf(key), int64(fence)).Scan(&one)
	return fenceResult(key, fence, err, errors.Is(err, sql.ErrNoRows))
}

func checkFenceArgs(key string, fence uint64) error {
	if err := driver.CheckKey(key); err != nil {
		return driver.Wrap("check fence", key, err)
	}
	if fence == 0 || fence > math.MaxInt64 {
		return driver.Invalid("check fence", key, "fence %d is no fence of this driver", fence)
	}
	return nil
}

func fenceResult(key string, fence uint64, err error, none bool) error {
	switch {
	case none:
		return driver.Wrap("check fence", key, fmt.Errorf("%w (fence %d)", ErrFenceStale, fence))
	case err != nil:
		return driver.Wrap("check fence", key, err)
	}
	return nil
}
