package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// hold is one acquisition: one etcd key "<prefix>/lock/<key>/<token>"
// whose create revision is the fence. It implements dlock.Lock.
//
// The life of a hold:
//
//	attempt ──Txn put succeeded, registered──▶ held ──Unlock's delete──▶ released
//	   │                                        └──key deleted, lease lost or expired──▶ lost
//	   └──busy, error (the key it may have written is deleted), Close──▶ (no handle)
//
// A hold ends once (end), and Done closes then. The rule every path keeps:
// while a hold reports held, etcd keeps its key at least until the local
// deadline of its lease (see lease), whatever became of each request; a
// key written by an attempt that returned no hold is deleted, or dies with
// a lease that nothing keeps alive. And its dual: a hold that ends other
// than by its own Unlock ends the work done under it (dlock.Guard and
// dlock.Do watch Done).
type hold struct {
	driver.Hold // the key, the owner, the state, Done and Err
	l           *Locker
	tbl         *driver.Table[*hold] // the Locker's table of the hold's kind
	token       string
	name        string // the etcd key
	rev         int64  // its create revision
	// qname is the hold's key in the line of waiters (see inLine), on
	// the lease qls; "" when it took the lock without waiting in line.
	qname string
	qls   *lease
	fence int64 // the revision that made it a hold (see Fence)

	mu    sync.Mutex
	lease *lease // replaced by a Refresh to another TTL
	// stopLease stops the hold's ending with its lease, watchTimer the
	// start of its watch, and closing stop (once the watch started) stops
	// the watch (see attach); detached is set when the hold ended, so
	// that none of them starts again.
	stopLease  func() bool
	watchTimer *time.Timer
	stop       chan struct{}
	detached   bool
	// releasing counts the releases in flight: the watch leaves a delete
	// to them, and notes it in deleted. released is set when a release
	// deleted the key: its delete event may reach the watch after the
	// release returned.
	releasing int
	deleted   bool
	released  bool
	// finishing is set when the hold starts to end: no release of it
	// starts after that (see finish). bare counts the releases in flight
	// that delete by name alone, with no condition.
	finishing bool
	bare      int
	// named is the lease whose token names the hold's key, when the name
	// may be reused (see names.go); nil otherwise.
	named *lease
	// val is the etcd value of the hold's key: the owner id for a lock,
	// the encoded entry (see entry) for a permit or a read or write hold;
	// Downgrade changes it.
	val string
}

var _ dlock.Lock = (*hold)(nil)

// newHold returns a pending lock of key for the owner of c.
func newHold(l *Locker, c call) *hold {
	h := &hold{l: l, tbl: &l.tables.Locks, val: c.owner}
	h.Init(c.kind, c.key, c.owner, c.ownerByOption)
	return h
}

func (h *hold) Token() string { return h.token }

// Fence is the revision at which the hold was taken: for a lock, and for
// a permit or a read or write lock taken at once, the create revision of
// its etcd key; for one that waited, the revision of the write that
// confirmed it. etcd revisions grow with every write to the cluster, so it
// is greater than the fence of every earlier acquisition of any key.
func (h *hold) Fence() uint64 { return uint64(h.fence) }

// value returns the etcd value of the hold's key.
func (h *hold) value() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.val
}

func (h *hold) currentLease() *lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// setLease sets the lease of h, not yet held.
func (h *hold) setLease(ls *lease) {
	h.mu.Lock()
	h.lease = ls
	h.mu.Unlock()
}

// end finishes the hold once with err (see driver.Table.End; the table's
// onEnd detaches it from its lease) and, for a lease of its own, revokes the lease. It
// reports whether this call ended it.
func (h *hold) end(err error) bool {
	h.finish()
	if !h.tbl.End(h, err) {
		return false
	}
	// Read after the end: a Refresh that swaps the lease either did so
	// before (and this revokes its new lease) or sees the end and revokes
	// the new lease itself.
	if ls := h.currentLease(); !ls.shared {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		ls.close(ctx)
		cancel()
	}
	return true
}

func (h *hold) lose(cause error) {
	if h.qname != "" {
		// Not reused before leaveLine's delete (see names.go).
		h.l.deleting.add(h.qname)
		defer h.l.deleting.done(h.qname)
	}
	if h.end(&dlock.LostError{Key: h.Key(), Err: cause}) {
		h.leaveLine()
	}
}

// Unlock deletes the hold's key. A late or repeated Unlock never deletes a
// newer hold (the flaw reported in etcd-io/etcd#22082): a repeated one
// sends nothing, and no later hold takes the key's name while a delete of
// it may still land (see names.go). It returns ErrNotHeld after a
// release, and the LostError when the lock was lost. When etcd does not
// answer before ctx ends, the release's outcome is unknown: Unlock returns
// the client's error, and the hold ends all the same (Done closes, Err
// matches ErrNotHeld and that error) and lapses within its TTL, for
// nothing renews it any more (see the package doc, Release).
func (h *hold) Unlock(ctx context.Context) error {
	if err := h.Check("unlock"); err != nil {
		return err
	}
	return h.release(ctx, dlock.ErrNotHeld)
}

// deletedByRelease reports whether a release is in flight, which then
// decides what the delete of the hold's key means.
func (h *hold) deletedByRelease() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releasing > 0 || h.released {
		h.deleted = true
		return true
	}
	return false
}

// release deletes the hold's key; a hold it releases ends with ended. A
// hold that another path ends meanwhile sends nothing: release waits for
// that end and returns what Unlock would.
func (h *hold) release(ctx context.Context, ended error) error {
	h.mu.Lock()
	if h.finishing {
		h.mu.Unlock()
		<-h.Done()
		return h.Check("unlock")
	}
	h.releasing++
	bare := h.qname == ""
	if bare {
		h.bare++
	}
	h.mu.Unlock()
	var (
		removed bool // the release deleted the hold's key
		err     error
	)
	if !bare {
		// The hold's key in the line goes with it: its delete wakes the
		// next waiter. The line's names are compared, not retired.
		var resp *clientv3.TxnResponse
		resp, err = h.l.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)).
			Then(clientv3.OpDelete(h.name), clientv3.OpDelete(h.qname)).Else(clientv3.OpDelete(h.qname)).Commit()
		removed = err == nil && resp.Succeeded
	} else {
		// By name alone: the key under it is the hold's (see names.go).
		var resp *clientv3.DeleteResponse
		resp, err = h.l.cli.Delete(ctx, h.name)
		removed = err == nil && resp.Deleted > 0
	}
	h.mu.Lock()
	h.releasing--
	if bare {
		h.bare--
	}
	if removed {
		h.released = true
	}
	deleted := h.deleted && h.releasing == 0
	h.mu.Unlock()
	if err != nil {
		if bare {
			h.retireName() // the delete may land later, after a next hold took the name
		}
		if deleted {
			// The key went while we could not learn whether we deleted
			// it: either way it is no longer held.
			h.lose(fmt.Errorf("%w: the etcd key of revision %d was deleted", dlock.ErrOwnershipLost, h.rev))
			return h.Wrap("unlock", err)
		}
		return h.abandon(err)
	}
	if !removed {
		h.lose(fmt.Errorf("%w: the etcd key of revision %d is gone", dlock.ErrOwnershipLost, h.rev))
		return h.Err()
	}
	if !h.end(ended) {
		return h.Err()
	}
	return nil
}

// abandon ends h, whose release's outcome is unknown (cause: etcd did not
// answer, or the caller's context ended first): its key may still be
// there, on a lease that would keep it for nobody. The key is
// left to lapse: a lease of the hold's own is no longer kept alive, and is
// revoked in the background; on the Locker's session, the key is deleted
// in the background, and the session is not renewed until that delete
// lands (see lease.pause). Either way the key is gone within the lease's
// TTL. The hold ends released, its Err matching dlock.ErrNotHeld and
// cause; abandon returns the release's error.
func (h *hold) abandon(cause error) error {
	ls := h.currentLease()
	if ls.shared {
		h.l.deleteLater(h.name, ls, ls.pause()) // paused before the hold ends
	}
	if h.qname != "" && h.qls.shared {
		h.l.deleteLater(h.qname, h.qls, nil)
	}
	ttl := ls.ttl
	ended := h.Wrap("unlock", fmt.Errorf("%w: the release's outcome is unknown, so the lock lapses within %v: %w", dlock.ErrNotHeld, ttl, cause))
	h.finish()
	if h.tbl.End(h, ended) {
		// Read after the end, as end does: a Refresh may have moved the
		// hold to a lease of its own.
		if own := h.currentLease(); !own.shared {
			own.lose(errReleaseUnknown)
			h.l.revokeLater(own)
		}
	}
	return h.Wrap("unlock", fmt.Errorf("the release's outcome is unknown; the lock lapses within %v: %w", ttl, cause))
}

// errReleaseUnknown is the Err of a lease that a hold whose release etcd
// did not answer no longer keeps alive.
var errReleaseUnknown = errors.New("dlock: lease given up after a release that etcd did not answer")

// Refresh checks that the lock is still held and gives it a lease of ttl
// (rounded up to whole seconds, at least one second). When ttl is the
// lease the hold has, etcd renews that lease; otherwise the hold moves to a
// new lease of ttl, renewed by a session of its own when the lock was
// acquired with the watchdog on.
func (h *hold) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := h.Check("refresh"); err != nil {
		return err
	}
	ttl, err := wholeSeconds(ttl)
	if err != nil {
		return h.Wrap("refresh", err)
	}
	old := h.currentLease()
	if ttl == old.ttl {
		if old.isPaused() {
			return h.Wrap("refresh", errPaused)
		}
		t0 := time.Now()
		if _, err := h.l.cli.KeepAliveOnce(ctx, old.id); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				h.lose(fmt.Errorf("%w: lease %x is gone", dlock.ErrOwnershipLost, int64(old.id)))
				return h.Err()
			}
			return h.Wrap("refresh", err)
		}
		if err := h.check(ctx, "refresh"); err != nil {
			return err
		}
		old.extend(t0)
		return nil
	}
	ls, err := newLease(ctx, h.l.cli, ttl, old.renew, &h.l.wg, h.l.onRenew())
	if err != nil {
		return h.Wrap("refresh", err)
	}
	resp, err := h.l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)).
		Then(clientv3.OpPut(h.name, h.value(), clientv3.WithLease(ls.id))).Commit()
	if err != nil || !resp.Succeeded {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		ls.close(rctx)
		cancel()
		if err != nil {
			return h.Wrap("refresh", err)
		}
		h.lose(fmt.Errorf("%w: the etcd key of revision %d is gone", dlock.ErrOwnershipLost, h.rev))
		return h.Err()
	}
	h.mu.Lock()
	if h.Err() != nil {
		h.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		ls.close(rctx)
		cancel()
		return h.Err()
	}
	h.moveLocked(ls)
	h.mu.Unlock()
	if !old.shared {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		old.close(rctx)
		cancel()
	}
	return nil
}

// errPaused is the error of a Refresh of a hold on a session whose renewal
// waits for a delete (see lease.pause).
var errPaused = errors.New("dlock: the session is not renewed until etcd answers the delete of a key that a failed release left on it; try again")

// check confirms, for the call op, that the hold's key is still the one
// it created.
func (h *hold) check(ctx context.Context, op string) error {
	resp, err := h.l.cli.Get(ctx, h.name)
	if err != nil {
		return h.Wrap(op, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
		h.lose(fmt.Errorf("%w: the etcd key of revision %d is gone", dlock.ErrOwnershipLost, h.rev))
		return h.Err()
	}
	return nil
}

// TTL returns the remaining lease of the hold, as etcd counts it (whole
// seconds), or an error matching ErrNotHeld when the lock is not held.
func (h *hold) TTL(ctx context.Context) (time.Duration, error) {
	if err := h.Check("ttl"); err != nil {
		return 0, err
	}
	if err := h.check(ctx, "ttl"); err != nil {
		return 0, err
	}
	r, err := h.l.cli.TimeToLive(ctx, h.currentLease().id)
	if err != nil {
		return 0, h.Wrap("ttl", err)
	}
	if r.TTL <= 0 {
		h.lose(fmt.Errorf("%w: lease %x is gone", dlock.ErrOwnershipLost, r.ID))
		return 0, h.Err()
	}
	return time.Duration(r.TTL) * time.Second, nil
}

// finish marks h as ending, before it leaves the Locker's table, so that
// no release of it starts any more; when a release is on its way whose
// delete, by name alone, could land after a later hold took the name, the
// name is retired (see names.go). A compared transaction (UnlockAfter's,
// a release from the line) deletes no later hold, and retires nothing.
func (h *hold) finish() {
	h.mu.Lock()
	h.finishing = true
	inFlight := h.bare > 0
	h.mu.Unlock()
	if inFlight {
		h.retireName()
	}
}

// retireName keeps every later hold from taking the name of h's key.
func (h *hold) retireName() {
	if h.named != nil {
		h.named.retire(h.name)
	}
}
