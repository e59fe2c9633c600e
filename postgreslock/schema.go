package postgreslock

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/dlock-go/dlock"
)

// Schema is the DDL of the driver's tables and functions for the default
// table name "dlock": the file schema.sql of this package, to copy into a
// migration. [Locker.CreateTable] runs it for the Locker's table name.
//
//go:embed schema.sql
var Schema string

// DefaultTable is the table name of a Locker made without [WithTable].
const DefaultTable = "dlock"

// identRE is a table name the driver accepts: lower-case letters, digits
// and underscores, optionally after a schema name of the same form. It
// needs no quoting, and leaves room for the suffixes of the other objects.
var identRE = regexp.MustCompile(`^([a-z_][a-z0-9_]{0,49}\.)?[a-z_][a-z0-9_]{0,49}$`)

// checkTable refuses a table name that is not a plain identifier.
func checkTable(name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("%w: table name %q: want lower-case letters, digits and underscores (at most 50, not starting with a digit), optionally as schema.table", dlock.ErrInvalidOption, name)
	}
	return nil
}

// wordRE finds the default name in the DDL, alone or before a suffix.
var wordRE = regexp.MustCompile(`\bdlock(_[a-z]+)?\b`)

// schemaFor returns the DDL for table name t.
func schemaFor(t string) string {
	if t == DefaultTable {
		return Schema
	}
	return wordRE.ReplaceAllStringFunc(Schema, func(w string) string { return t + strings.TrimPrefix(w, "dlock") })
}

// CreateTable creates the Locker's tables and functions when they are
// missing (see [Schema]): for a quick start. Production systems usually
// run the DDL from their migrations instead. It needs the privileges to
// create tables and functions in the schema. Processes that start
// together may each call it: the calls take turns (a transaction-scoped
// advisory lock), for PostgreSQL's IF NOT EXISTS does not keep two
// creations of one table apart.
func (l *Locker) CreateTable(ctx context.Context) error {
	// One simple query: its statements run as one transaction, which the
	// advisory lock, taken first, serialises with the other calls.
	ddl := "SELECT pg_advisory_xact_lock(hashtext('postgreslock.CreateTable'));\n" + schemaFor(l.table)
	if _, err := l.pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("postgreslock: create table %s: %w", l.table, err)
	}
	return nil
}

// statements are the driver's SQL for one table name.
type statements struct {
	acquire, acquireKnown, release, renew, refresh, ttl, leave, watch, downgrade string
}

// acquireSQL is the acquisition statement for table t, with the insert of
// a new name's row (insert) or without.
func acquireSQL(t string, insert bool) string {
	took := `), took AS (
	SELECT fence, waited FROM u
)`
	if insert {
		took = `), i AS (
	INSERT INTO ` + t + ` AS d (name, fence, hold_fence, token, owner, expires_at, more, waited)
	SELECT $1::text, 1, 1, $2::text, $4::text, now() + $5::bigint * interval '1 millisecond', false, false
	WHERE $3::"char" = 'l' AND $7::text = '' AND $9::text = '' AND NOT EXISTS (SELECT FROM u)
	ON CONFLICT (name) DO NOTHING
	RETURNING d.fence, d.waited
), took AS (
	SELECT fence, waited FROM u UNION ALL SELECT fence, waited FROM i
)`
	}
	return `WITH u AS (
	UPDATE ` + t + ` AS d SET fence = d.fence + 1, hold_fence = d.fence + 1, token = $2::text, owner = $4::text,
	       expires_at = now() + $5::bigint * interval '1 millisecond'
	WHERE d.name = $1::text AND $3::"char" = 'l' AND $7::text = '' AND $9::text = ''
	  AND NOT d.more AND (d.token = '' OR d.expires_at <= now())
	RETURNING d.fence, d.waited
` + took + `
SELECT took.fence, 0::bigint FROM took
WHERE (CASE WHEN took.waited THEN ` + t + `_notify($1::text, false)::text ELSE '' END) IS NOT NULL
UNION ALL
SELECT a.fence, coalesce(a.retry_ms, 0)
FROM ` + t + `_acquire($1::text, $2::text, $3::"char", $4::text, $5::bigint, $6::integer, $7::text, $8::bigint, $9::text) AS a
WHERE NOT EXISTS (SELECT FROM took)`
}

// channelOf is the channel a Locker named id listens on: the notify
// function of the schema sends each waiter's wake-up there.
func channelOf(id string) string { return "dlock_" + id }

func newStatements(t string) statements {
	return statements{
		// An attempt at a lock that is free, by a caller that has not
		// registered as a waiter, is one UPDATE of the name's row (u), or
		// the INSERT of the row of a name never taken (i, as the acquire
		// function makes it); every other (a busy or reentrant one, a
		// waiter's, a semaphore's or read-write lock's) runs the acquire
		// function, only when u and i took nothing. The function
		// starts from a snapshot of its own.
		acquire: acquireSQL(t, true),
		// The same without i, for a name whose row is there (see
		// Locker.known): the plan of i's INSERT … ON CONFLICT makes the
		// server's memory for the statement grow past what it keeps, so
		// that every execution allocated about 170 KB and gave it back
		// to the system. For a row that is not there after all, the
		// function makes it.
		acquireKnown: acquireSQL(t, false),
		// A release commits without waiting for its WAL to reach the
		// disk, unless it grants the lock to a waiter (see schema.sql).
		// A lock's hold in its name's row, which says nobody waits, is
		// released by one UPDATE (u); every other release runs the
		// release function, only when u changed nothing. A waiter's
		// registration sets waited in the row, and u waits for it and
		// then reads the row's newest version.
		release: `WITH u AS (
	UPDATE ` + t + ` SET token = '' WHERE name = $1::text AND token = $2::text AND $2::text <> '' AND NOT waited
	RETURNING 1
)
SELECT set_config('synchronous_commit', 'off', true) <> '' FROM u
UNION ALL
SELECT ` + t + `_release($1::text, $2::text) WHERE NOT EXISTS (SELECT FROM u)`,
		// A lock's hold is in its name's row, or (a further hold of its
		// owner, a permit, a read or write lock) in the holds table: the
		// statements keyed by token look in both. No token is '', which
		// marks a row with no hold.
		renew: `WITH r AS (UPDATE ` + t + ` AS d SET expires_at = now() + u.ttl * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(name, token, ttl)
WHERE d.name = u.name AND d.token = u.token AND d.token <> '' RETURNING d.name, d.token),
h AS (UPDATE ` + t + `_holds AS h SET expires_at = now() + u.ttl * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(name, token, ttl)
WHERE h.name = u.name AND h.token = u.token RETURNING h.name, h.token)
SELECT name, token FROM r UNION ALL SELECT name, token FROM h`,
		refresh: `WITH r AS (UPDATE ` + t + ` SET expires_at = now() + $3::bigint * interval '1 millisecond' WHERE name = $1::text AND token = $2::text AND token <> '' RETURNING 1),
h AS (UPDATE ` + t + `_holds SET expires_at = now() + $3::bigint * interval '1 millisecond' WHERE name = $1::text AND token = $2::text RETURNING 1)
SELECT 1 FROM r UNION ALL SELECT 1 FROM h`,
		ttl: `SELECT ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint FROM (
SELECT expires_at FROM ` + t + ` WHERE name = $1::text AND token = $2::text AND token <> ''
UNION ALL SELECT expires_at FROM ` + t + `_holds WHERE name = $1::text AND token = $2::text) AS x`,
		// Leaving is a release's kind: a registration a crash brings back
		// lapses; a grant it hands on commits durably.
		leave: `SELECT ` + t + `_leave($1::text, $2::text, $3::text)`,
		downgrade: `WITH d AS (UPDATE ` + t + `_holds SET kind = 'r' WHERE name = $1::text AND token = $2::text RETURNING name)
SELECT ` + t + `_notify(name, true) FROM d`,
		// A watch sets waited in the name's row, so that its
		// acquisitions and releases look for the watchers.
		watch: `WITH r AS (INSERT INTO ` + t + ` AS d (name, waited) VALUES ($1::text, true)
	ON CONFLICT (name) DO UPDATE SET waited = true WHERE NOT d.waited)
INSERT INTO ` + t + `_waiters (name, waiter, kind, until) VALUES ($1::text, $2::text, 'o', now() + $3::bigint * interval '1 millisecond')
ON CONFLICT (name, waiter) DO UPDATE SET until = EXCLUDED.until`,
	}
}
