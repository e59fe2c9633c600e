package postgreslock

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// infoSQL reads the Info of the names that the condition (on d, the
// table's rows) selects.
func (l *Locker) infoSQL(cond string) string {
	t := l.table
	return `SELECT d.name, d.fence, d.lim,
	coalesce(h.n, 0), coalesce(h.readers, 0), coalesce(h.owner, ''), coalesce(h.left_ms, 0),
	(SELECT count(*) FROM ` + t + `_waiters w WHERE w.name = d.name AND w.kind <> 'o' AND w.until > now())
FROM ` + t + ` d LEFT JOIN LATERAL (
	SELECT count(*) AS n, count(*) FILTER (WHERE kind = 'r') AS readers, max(owner) AS owner,
	       ceil(extract(epoch FROM max(expires_at) - now()) * 1000)::bigint AS left_ms
	FROM (SELECT 'l'::"char" AS kind, d.owner, d.expires_at WHERE d.token <> '' AND d.expires_at > now()
	      UNION ALL
	      SELECT kind, owner, expires_at FROM ` + t + `_holds WHERE name = d.name AND expires_at > now()) x) h ON true
WHERE ` + cond + `
ORDER BY d.name`
}

// kindOf maps an Info kind to the kind of its holds, and the name's part.
func kindOf(k dlock.Kind) (driver.HoldKind, error) {
	if k == dlock.KindLock {
		return driver.HoldLock, nil
	}
	return driver.HoldKindOf(k)
}

// Inspect reads what the tables hold about key's lock. It changes
// nothing. The fence is known also for a free lock: the table keeps it.
func (l *Locker) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	return l.InspectKind(ctx, dlock.KindLock, key)
}

// InspectKind reads key's lock of kind k: a lock, a semaphore or a
// read-write lock.
func (l *Locker) InspectKind(ctx context.Context, k dlock.Kind, key string) (dlock.Info, error) {
	if err := l.checkInspect(key); err != nil {
		return dlock.Info{}, err
	}
	hk, err := kindOf(k)
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	infos, err := l.read(ctx, k, l.infoSQL("d.name = $1::text"), l.nameOf(hk, key))
	if err != nil {
		return dlock.Info{}, driver.Wrap("inspect", key, err)
	}
	if len(infos) == 0 {
		return dlock.Info{Key: key, Kind: k, FenceKnown: true, WaitersKnown: true}, nil
	}
	return infos[0], nil
}

func (l *Locker) checkInspect(key string) error {
	if l.tables.Locks.Closed() {
		return driver.Wrap("inspect", key, dlock.ErrClosed)
	}
	if err := driver.CheckKey(key); err != nil {
		return driver.Wrap("inspect", key, err)
	}
	return nil
}

// read runs an info query and decodes its rows as Infos of kind k.
func (l *Locker) read(ctx context.Context, k dlock.Kind, sql string, args ...any) ([]dlock.Info, error) {
	hk, err := kindOf(k)
	if err != nil {
		return nil, err
	}
	head := l.nameOf(hk, "")
	rows, err := l.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var (
		out                            []dlock.Info
		name, owner                    string
		fence, n, readers, left, waits int64
		lim                            int32
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &fence, &lim, &n, &readers, &owner, &left, &waits}, func() error {
		info := dlock.Info{
			Key: strings.TrimPrefix(name, head), Held: n > 0, Holds: int(n), Fence: uint64(fence), FenceKnown: true,
			Waiters: int(waits), WaitersKnown: true, Kind: k,
		}
		if n > 0 {
			info.TTL = time.Duration(left) * time.Millisecond
			info.Owner = owner
		}
		switch k {
		case dlock.KindSemaphore:
			info.Limit = int(lim)
		case dlock.KindRWLock:
			info.Readers = int(readers)
		}
		out = append(out, info)
		return nil
	})
	return out, err
}

// List returns the held locks whose key matches pattern, sorted by key.
// See [dlock.Inspector.List].
func (l *Locker) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return l.ListKind(ctx, dlock.KindLock, pattern)
}

// ListKind returns the held locks of kind k whose key matches pattern.
func (l *Locker) ListKind(ctx context.Context, k dlock.Kind, pattern string) ([]dlock.Info, error) {
	if l.tables.Locks.Closed() {
		return nil, &dlock.KeyError{Op: "list", Err: dlock.ErrClosed}
	}
	p, err := driver.ParsePattern(pattern)
	if err != nil {
		return nil, err
	}
	hk, err := kindOf(k)
	if err != nil {
		return nil, err
	}
	head := l.nameOf(hk, p.Literal())
	infos, err := l.read(ctx, k, l.infoSQL("starts_with(d.name, $1::text) AND h.n > 0"), head)
	if err != nil {
		return nil, fmt.Errorf("dlock: list: %w", err)
	}
	out := infos[:0]
	for _, in := range infos {
		if p.Match(in.Key) {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ForceUnlock ends every hold of key's lock in one statement and wakes
// its waiters. Each holder learns of it at its next renewal (or Refresh,
// TTL, Unlock): its Done closes, with ErrOwnershipLost. The fence stays.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (dlock.Info, error) {
	info, err := l.Inspect(ctx, key)
	if err != nil {
		return dlock.Info{}, err
	}
	name := l.nameOf(driver.HoldLock, key)
	t := l.table
	tag, err := l.pool.Exec(ctx, `WITH r AS (UPDATE `+t+` SET token = '' WHERE name = $1::text AND token <> '' RETURNING expires_at > now() AS live),
d AS (DELETE FROM `+t+`_holds WHERE name = $1::text RETURNING expires_at > now() AS live)
SELECT `+t+`_notify($1::text, true) FROM (SELECT 1 FROM (SELECT live FROM r UNION ALL SELECT live FROM d) AS a WHERE live LIMIT 1) x`, name)
	if err != nil {
		return dlock.Info{}, driver.Wrap("force unlock", key, err)
	}
	if tag.RowsAffected() == 0 || !info.Held {
		return dlock.Info{}, driver.Wrap("inspect", key, dlock.ErrNotHeld)
	}
	return info, nil
}
