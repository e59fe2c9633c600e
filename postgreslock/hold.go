package postgreslock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// hold is one acquisition, keyed by the lock's name and the
// acquisition's token: a lock's hold in its name's row, or a row of the
// holds table (see schema.sql for which). It implements dlock.Lock.
//
//	attempt ──hold written, in the table──▶ held ──release ended the hold──▶ released
//	   │                                      ├──renewal found no hold──────▶ lost
//	   │                                      └──local deadline passed──────▶ lost
//	   └──busy, error (a hold it may have taken is released), Close──▶ (no handle)
//
// While a hold reports held, its row lives at least until the local
// deadline, which counts from before the statement that set the lease was
// sent: the server sets expires_at from its own now(), taken after that.
type hold struct {
	driver.Hold
	driver.Lease
	l     *Locker
	tbl   *driver.Table[*hold]
	name  string // the row name (see Locker.nameOf)
	owner string // the owner column: the caller's owner, "" for none
}

var (
	_ dlock.Lock        = (*hold)(nil)
	_ driver.Lapser     = (*hold)(nil)
	_ driver.Downgrader = (*hold)(nil)
)

// Unlock ends the hold, keyed by its token: sent again, it finds
// nothing and changes nothing. A release whose reply does not come is
// sent again once; when that fails too, Unlock returns the error and the
// hold ends as released all the same: it is no longer renewed, so its row
// lapses at its lease.
func (h *hold) Unlock(ctx context.Context) error {
	if err := h.Check("unlock"); err != nil {
		return err
	}
	return h.release(ctx, dlock.ErrNotHeld)
}

// release deletes the row and ends the hold with why (released), or as
// lost when the row was gone. It waits for the server RequestTimeout at
// most, resending included.
func (h *hold) release(ctx context.Context, why error) error {
	l := h.l
	if err := l.wd.Releasing(h); err != nil {
		return h.tbl.Lose(h, err)
	}
	rctx, done := bounded(ctx, &l.releases)
	deleted, err := l.releaseRow(rctx, h.name, h.Token())
	if err != nil && rctx.Err() == nil {
		// The outcome is unknown: the statement may have run. Deleting
		// by token again is safe, and tells.
		if _, err = l.releaseRow(rctx, h.name, h.Token()); err == nil {
			deleted = true // by this one or the first
		}
	}
	err = done(err)
	switch {
	case err != nil:
		err = h.Wrap("unlock", err)
		h.tbl.End(h, fmt.Errorf("%w: %w", why, err))
		return err
	case !deleted:
		return h.tbl.Lose(h, errHoldGone)
	}
	h.tbl.End(h, why)
	return nil
}

// releaseRow runs the release function.
func (l *Locker) releaseRow(ctx context.Context, name, token string) (bool, error) {
	var deleted bool
	err := l.pool.QueryRow(ctx, l.sql.release, name, token).Scan(&deleted)
	return deleted, err
}

// Refresh sets the hold's lease to ttl from now, in the server's time.
func (h *hold) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := h.Check("refresh"); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return h.Wrap("refresh", fmt.Errorf("%w: %v is below 1ms", dlock.ErrInvalidTTL, ttl))
	}
	sent := time.Now()
	tag, err := h.l.pool.Exec(ctx, h.l.sql.refresh, h.name, h.Token(), ttl.Milliseconds())
	if err != nil {
		h.l.wd.Refreshed(h, sent, ttl, false)
		return h.Wrap("refresh", err)
	}
	if tag.RowsAffected() == 0 {
		return h.tbl.Lose(h, errHoldGone)
	}
	h.l.wd.Refreshed(h, sent, ttl, true)
	return h.Check("refresh")
}

// TTL asks the server for the hold's remaining lease.
func (h *hold) TTL(ctx context.Context) (time.Duration, error) {
	if err := h.Check("ttl"); err != nil {
		return 0, err
	}
	var ms int64
	err := h.l.pool.QueryRow(ctx, h.l.sql.ttl, h.name, h.Token()).Scan(&ms)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, h.tbl.Lose(h, errHoldGone)
	case err != nil:
		return 0, h.Wrap("ttl", err)
	}
	return time.Duration(max(ms, 0)) * time.Millisecond, nil
}

// UnlockAfter sets the hold's lease to d from now (rounded up to whole
// milliseconds), stops renewing it and forgets it: the row lapses when d
// has passed. See [driver.Lapser].
func (h *hold) UnlockAfter(ctx context.Context, d time.Duration) error {
	if err := h.Check("unlock"); err != nil {
		return err
	}
	if d <= 0 {
		return h.Unlock(ctx)
	}
	if err := h.l.wd.Releasing(h); err != nil {
		return h.tbl.Lose(h, err)
	}
	ms := (d + time.Millisecond - 1).Milliseconds()
	tag, err := h.l.pool.Exec(ctx, h.l.sql.refresh, h.name, h.Token(), ms)
	switch {
	case err != nil:
		return h.Wrap("unlock", err)
	case tag.RowsAffected() == 0:
		return h.tbl.Lose(h, errHoldGone)
	}
	h.tbl.End(h, dlock.ErrNotHeld)
	return nil
}

// Downgrade turns a write lock into a read lock in one statement: the
// row keeps its token, fence and lease. The statement is keyed by token
// and sent again once when its reply does not come (sent again, it finds
// the row a reader's already and changes nothing). When that fails too,
// or RequestTimeout passes, the row may be a reader's or still the
// writer's: Downgrade returns the error, and the handle stays a write
// lock (its Unlock releases the row either way).
func (h *hold) Downgrade(ctx context.Context) error {
	if err := h.CheckDowngrade(); err != nil {
		return err
	}
	rctx, done := bounded(ctx, &h.l.releases)
	tag, err := h.l.pool.Exec(rctx, h.l.sql.downgrade, h.name, h.Token())
	if err != nil && rctx.Err() == nil {
		tag, err = h.l.pool.Exec(rctx, h.l.sql.downgrade, h.name, h.Token())
	}
	err = done(err)
	switch {
	case err != nil:
		return h.Wrap("downgrade", fmt.Errorf("the outcome is unknown: %w", err))
	case tag.RowsAffected() == 0:
		return h.tbl.Lose(h, errHoldGone)
	}
	h.Downgraded()
	return nil
}

// errHoldGone is the error of a hold whose server-side record (in its
// name's row or in the holds table) is no longer its own: it lapsed and
// was taken, or was forced open.
var errHoldGone = fmt.Errorf("%w: the hold was gone", dlock.ErrOwnershipLost)
