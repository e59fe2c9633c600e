package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Permits and read and write locks share one layout in etcd and one way
// of waiting. Every hold, and every waiter, is an etcd key of its own,
// "<prefix>/sem/<key>/<token>" or "<prefix>/rw/<key>/<token>", on the
// lease of whoever acquires it, whose value says what it is (see entry).
// The keys of one lock form a queue ordered by create revision: a caller
// puts its key at the end and reads the queue in one transaction, and is
// admitted by the keys ahead of it (see entry.blockedBy):
//
//   - a permit, while fewer keys than the limit are ahead of it;
//   - a reader, while no writer of another owner is ahead of it;
//   - a writer, while no key of another owner is ahead of it.
//
// So a waiting writer holds back the readers behind it (writers come
// first), and a key once admitted stays admitted: keys only leave the
// queue ahead of it, and new ones join behind. An owner's second key takes
// the place of the owner's first (a reentrant hold is not queued behind a
// writer that waits for the owner), written by a transaction that checks
// that the queue did not change since it was read and that the first key
// is still there: a release of the first key in between would otherwise
// admit a waiter behind it while the second key took its place.
//
// A waiter follows the queue with one watch, keeps its own copy of it, and
// makes no request until the copy admits it: a release wakes with a
// request only the waiters it admits. Then one transaction confirms that
// its key is still there and makes it a hold: the revision of that write is
// its fence, greater than every fence handed out before. A waiter that
// gives up deletes its key; one that dies leaves it to its lease.

// kind is what a hold holds; the etcd values begin with its letter.
type kind = driver.HoldKind

// baseOf is the etcd prefix of the queue of key's holds of kind k:
// "<prefix>/sem/<key>/" for a permit, "<prefix>/rw/<key>/" for a read or
// write lock, with key escaped as for a lock. A semaphore's limit is the
// value of the key "<prefix>/sem/<key>/" itself.
func (l *Locker) baseOf(k kind, key string) string {
	return l.opts.Prefix + "/" + k.Space() + "/" + escape(key) + "/"
}

// entry is one key of a queue: its value is the kind's letter, a number,
// '|' and the owner id. The number of a permit is the limit its
// acquisition gave; that of a read or write lock its order, empty when it
// is the key's create revision.
type entry struct {
	name   string
	create int64 // the create revision
	mod    int64 // the revision of the latest write
	order  int64 // the create revision, or that of the owner's key it joined
	limit  int   // a permit's
	kind   kind
	owner  string
	lease  clientv3.LeaseID
}

// entryValue is the etcd value of an entry with number n (see entry).
func entryValue(k kind, n int64, owner string) string {
	o := ""
	if n != 0 {
		o = strconv.FormatInt(n, 10)
	}
	return string(rune(k)) + o + "|" + owner
}

// parseEntry reads a key of a queue; it reports false for a key that
// another program wrote.
func parseEntry(kv *mvccpb.KeyValue) (entry, bool) {
	v := string(kv.Value)
	if len(v) < 2 {
		return entry{}, false
	}
	num, owner, ok := strings.Cut(v[1:], "|")
	e := entry{name: string(kv.Key), create: kv.CreateRevision, mod: kv.ModRevision, order: kv.CreateRevision, kind: kind(v[0]), owner: owner, lease: clientv3.LeaseID(kv.Lease)}
	if num != "" {
		n, err := strconv.ParseInt(num, 10, 64)
		ok = ok && err == nil && n > 0
		if e.kind == driver.HoldPermit {
			e.limit = int(min(n, dlock.MaxLimit))
		} else {
			e.order = n
			ok = ok && n <= kv.CreateRevision
		}
	}
	return e, ok && (e.kind == driver.HoldPermit || e.kind == driver.HoldRead || e.kind == driver.HoldWrite)
}

// before reports whether me is ahead of o in the queue.
func (me entry) before(o entry) bool {
	return me.order < o.order || me.order == o.order && me.create < o.create
}

// blockedBy reports whether e, ahead of me, stands in its way: every
// permit does (up to the limit), a writer of another owner keeps a reader
// out, and any key of another owner keeps a writer out.
func (me entry) blockedBy(e entry) bool {
	mine := me.owner != "" && e.owner == me.owner
	switch me.kind {
	case driver.HoldWrite:
		return !mine
	case driver.HoldRead:
		return e.kind == driver.HoldWrite && !mine
	}
	return true
}

// view is a caller's copy of a queue, as of revision rev.
type view struct {
	base    string
	rev     int64
	entries map[string]entry
	limit   int // the semaphore's limit as stored, 0 when none is
}

// limitOr returns the semaphore's limit: the one stored; while none is
// (the lease of the acquisition that wrote it last ended), the limit of
// the newest permit or waiter; else own.
func (v *view) limitOr(own int) int {
	if v.limit > 0 {
		return v.limit
	}
	var newest entry
	for _, e := range v.entries {
		if e.limit > 0 && e.create > newest.create {
			newest = e
		}
	}
	if newest.limit > 0 {
		return newest.limit
	}
	return own
}

func newView(base string, rev int64, kvs []*mvccpb.KeyValue) *view {
	v := &view{base: base, rev: rev, entries: make(map[string]entry, len(kvs))}
	for _, kv := range kvs {
		v.put(kv)
	}
	return v
}

func (v *view) put(kv *mvccpb.KeyValue) {
	if string(kv.Key) == v.base {
		v.limit, _ = strconv.Atoi(string(kv.Value))
		v.limit = min(max(v.limit, 0), dlock.MaxLimit)
		return
	}
	if e, ok := parseEntry(kv); ok {
		v.entries[e.name] = e
	} else {
		delete(v.entries, string(kv.Key))
	}
}

// apply brings the view to the revision of a watch response.
func (v *view) apply(resp clientv3.WatchResponse) {
	for _, ev := range resp.Events {
		switch {
		case ev.Type == mvccpb.PUT:
			v.put(ev.Kv)
		case string(ev.Kv.Key) == v.base:
			v.limit = 0
		default:
			delete(v.entries, string(ev.Kv.Key))
		}
	}
	v.rev = resp.Header.Revision
}

// admits reports whether the view admits me, a permit of a semaphore
// whose caller gave limit (see limitOr); else it returns the first entry
// in its way.
func (v *view) admits(me entry, limit int) (bool, entry) {
	limit = v.limitOr(limit)
	n := 0
	var first entry
	for _, e := range v.entries {
		if e.name == me.name || !e.before(me) || !me.blockedBy(e) {
			continue
		}
		n++
		if first.name == "" || e.before(first) {
			first = e
		}
	}
	if me.kind == driver.HoldPermit {
		return n < limit, first
	}
	return n == 0, first
}

// newHoldOf returns a pending hold for c, of any kind.
func (l *Locker) newHoldOf(ctx context.Context, c call) (*hold, error) {
	h := newHold(l, c)
	if c.kind == driver.HoldLock {
		return h, nil
	}
	h.tbl, h.token = l.tables.Of(c.kind), driver.NewToken()
	switch {
	case c.kind == driver.HoldPermit:
		if err := driver.CheckLimit(c.limit); err != nil {
			return nil, driver.Wrap("acquire", c.key, err)
		}
		if c.owner == "" {
			// A Locker may hold many permits of a key: each is a holder
			// of its own in the table, found by Release as a WithOwner
			// hold is.
			h.Init(c.kind, c.key, h.token, true)
		}
	case c.kind == driver.HoldWrite && c.owner == "":
		// This Locker's own read lock would make the writer wait on
		// itself: say so rather than ErrAlreadyHeld.
		if r, err := h.tbl.Find(ctx, c.key); err == nil && r.Reads() {
			return nil, driver.Wrap("lock", c.key, dlock.ErrUpgrade)
		}
	}
	return h, nil
}

// errGone says that a waiter's key left the queue (its lease ended, or an
// operator deleted it): it queues again.
var errGone = fmt.Errorf("%w: the queued key is gone", dlock.ErrNotAcquired)

// queue takes a permit or a read or write lock for c: it places h's key
// in the queue on the session ls, or (ls nil: a try with a pinned lease)
// on a lease granted here, and, when the key is not admitted at once,
// waits (wait) or withdraws it. A pinned lease that waits queues on the
// session and moves to a lease granted when it is admitted, since its time
// runs from the acquisition.
func (l *Locker) queue(ctx, actx context.Context, c call, h *hold, ls *lease, wait bool) (dlock.Lock, error) {
	retry := driver.NewBackoff(c.opts.Retry)
	limit, stopLimit := c.waitLimit(wait)
	defer stopLimit()
	lsDone := ls.ended()
	for {
		h.tbl.Attempted(h)
		qls := ls
		if qls == nil {
			var err error
			if qls, err = newLease(actx, l.cli, c.opts.TTL, false, &l.wg, nil); err != nil {
				return nil, l.failed(ctx, actx, c, nil, busy{}, fmt.Errorf("grant a lease: %w", err), false)
			}
		}
		v, me, err := l.place(actx, c, h, qls)
		if err == nil {
			ok, first := v.admits(me, c.limit)
			switch {
			case ok && (c.renew || ls == nil):
				return l.admit(ctx, h, qls)
			case !ok && !wait:
				l.withdraw(actx, h, qls, ls)
				return nil, l.notAcquired(actx, c, busy{lease: first.lease}, nil)
			case !ok:
				if ok, err = l.await(ctx, c, h, v, me, ls, limit, retry.Next); err != nil && err != errGone {
					return nil, err
				}
			}
			if ok {
				if err = l.confirm(actx, c, h, ls); err == nil {
					return l.admit(ctx, h, h.currentLease())
				}
			}
		}
		if ls == nil {
			l.withdraw(actx, h, qls, ls)
		}
		switch {
		case err == errRetry && !wait:
			return nil, l.notAcquired(ctx, c, busy{}, nil)
		case err == errGone || err == errRetry:
			continue // queue again
		case errors.Is(err, dlock.ErrUpgrade):
			return nil, err
		case err != nil:
			if e := l.failed(ctx, actx, c, ls, busy{}, err, wait); e != nil {
				return nil, e
			}
		}
		// A waiter rides out a failed round trip and queues again after
		// the retry delay; a wait that runs out meanwhile ends with that
		// round trip's error, for etcd out of reach is not a busy lock.
		d, ok := retry.Next()
		if !ok {
			return nil, driver.Wrap("lock", c.key, err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, l.notAcquired(context.WithoutCancel(ctx), c, busy{}, context.Cause(ctx))
		case <-limit:
			t.Stop()
			return nil, driver.Wrap("lock", c.key, err)
		case <-lsDone:
			t.Stop()
			return nil, &dlock.NotAcquiredError{Key: c.key, Err: ls.err}
		case <-t.C:
		}
	}
}

// errRetry asks queue to place the key again at once.
var errRetry = fmt.Errorf("%w: the queue kept changing", dlock.ErrNotAcquired)

// place puts h's key at the end of the queue on ls and reads the queue,
// in one transaction; a semaphore's limit is written beside it. The key
// of an owner that has keys in the queue then takes the place of the
// owner's first key, in a transaction that checks that the queue did not
// change since it was read and that the owner's first key is still there;
// a writer whose owner has a read key gets dlock.ErrUpgrade.
func (l *Locker) place(ctx context.Context, c call, h *hold, ls *lease) (*view, entry, error) {
	base := l.baseOf(c.kind, c.key)
	from, end := base+"\x00", clientv3.GetPrefixRangeEnd(base)
	h.name = base + h.token
	if c.kind == driver.HoldPermit {
		h.setValue(entryValue(c.kind, int64(c.limit), c.owner))
	} else {
		h.setValue(entryValue(c.kind, 0, c.owner))
	}
	ops := []clientv3.Op{clientv3.OpPut(h.name, h.value(), clientv3.WithLease(ls.id))}
	if c.kind == driver.HoldPermit {
		// The latest acquisition's limit is the semaphore's.
		ops = append(ops, clientv3.OpPut(base, strconv.Itoa(c.limit), clientv3.WithLease(ls.id)))
	}
	ops = append(ops, clientv3.OpGet(base, clientv3.WithRange(end)))
	resp, err := l.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		l.forget(ctx, h.name, ls)
		return nil, entry{}, err
	}
	h.rev, h.fence = resp.Header.Revision, resp.Header.Revision
	v := newView(base, resp.Header.Revision, resp.Responses[len(ops)-1].GetResponseRange().Kvs)
	me, ok := v.entries[h.name]
	if !ok {
		return nil, entry{}, errGone
	}
	if c.owner == "" || c.kind == driver.HoldPermit {
		return v, me, nil
	}
	for range maxRaces {
		// pred is the owner's key whose place ours takes: the first of
		// them in the queue.
		order, pred := me.create, entry{}
		for _, e := range v.entries {
			if e.name == me.name || e.owner != c.owner {
				continue
			}
			if c.kind == driver.HoldWrite && e.kind == driver.HoldRead {
				l.forget(ctx, h.name, ls)
				return nil, entry{}, driver.Wrap("lock", c.key, dlock.ErrUpgrade)
			}
			if e.order < order {
				order, pred = e.order, e
			}
		}
		if order == me.order {
			return v, me, nil
		}
		// Nothing in the queue was written since the read, and pred is
		// still there: a key deleted since is no longer in the range, so
		// only its own create revision tells. Without that check, a key
		// could take the place of a hold that was released meanwhile,
		// beside a waiter that the release admitted.
		val := entryValue(c.kind, order, c.owner)
		resp, err := l.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(from), "<", v.rev+1).WithRange(end),
				clientv3.Compare(clientv3.CreateRevision(pred.name), "=", pred.create)).
			Then(clientv3.OpPut(h.name, val, clientv3.WithLease(ls.id))).
			Else(clientv3.OpGet(base, clientv3.WithRange(end))).Commit()
		if err != nil {
			l.forget(ctx, h.name, ls)
			return nil, entry{}, err
		}
		if resp.Succeeded {
			h.setValue(val)
			me.order = order
			v.entries[me.name] = me
			v.rev, h.fence = resp.Header.Revision, resp.Header.Revision
			return v, me, nil
		}
		v = newView(base, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
		if me, ok = v.entries[h.name]; !ok {
			return nil, entry{}, errGone
		}
	}
	l.forget(ctx, h.name, ls)
	return nil, entry{}, errRetry
}

// await follows the queue of v, in which h's key me waits on the session
// ls, until it admits me (true), me leaves it (errGone), or the call gives
// up: then it deletes me and returns the call's error. Its copy of the
// queue is brought up to date by a watch, or read again at the retry
// strategy's pace when there is none (dlock.WithNotify(false), or a watch
// that broke).
func (l *Locker) await(ctx context.Context, c call, h *hold, v *view, me entry, ls *lease, limit <-chan time.Time, next func() (time.Duration, bool)) (bool, error) {
	end := clientv3.GetPrefixRangeEnd(v.base)
	var watch clientv3.WatchChan
	stopWatch := func() {}
	defer func() { stopWatch() }()
	h.tbl.Waiting(h)
	giveUp := func(cause error) (bool, error) {
		_, first := v.admits(me, c.limit)
		if cause != nil {
			l.forget(ctx, h.name, ls)
			return false, l.notAcquired(context.WithoutCancel(ctx), c, busy{lease: first.lease}, cause)
		}
		// The wait ran out: withdrawing and the retry-after hint have
		// one request timeout between them.
		cctx, cancel := context.WithTimeout(ctx, RequestTimeout)
		defer cancel()
		l.forget(cctx, h.name, ls)
		return false, l.notAcquired(cctx, c, busy{lease: first.lease}, nil)
	}
	for {
		if watch == nil && c.opts.Notify {
			wctx, cancel := context.WithCancel(ctx)
			stopWatch = cancel
			watch = l.cli.Watch(clientv3.WithRequireLeader(wctx), v.base, clientv3.WithRange(end), clientv3.WithRev(v.rev+1))
		}
		d, ok := next()
		if !ok {
			return giveUp(nil)
		}
		reread := false
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return giveUp(context.Cause(ctx))
		case <-limit:
			t.Stop()
			return giveUp(nil)
		case <-ls.done:
			t.Stop()
			return false, &dlock.NotAcquiredError{Key: c.key, Err: ls.err}
		case resp, ok := <-watch:
			t.Stop()
			if !ok || resp.Canceled || resp.Err() != nil {
				// Compacted, or no leader: read again, then watch again.
				stopWatch()
				watch, reread = nil, true
				break
			}
			v.apply(resp)
			h.tbl.Woken(h, false)
		case <-t.C:
			reread = watch == nil
		}
		if reread {
			resp, err := l.cli.Get(ctx, v.base, clientv3.WithRange(end))
			if err != nil {
				l.opts.Logger.DebugContext(ctx, "read the queue failed, waiting on", "key", c.key, "error", err)
				continue
			}
			*v = *newView(v.base, resp.Header.Revision, resp.Kvs)
		}
		if _, ok := v.entries[me.name]; !ok {
			return false, errGone
		}
		if ok, _ := v.admits(me, c.limit); ok {
			return true, nil
		}
	}
}

// confirm makes the key of h, admitted after it waited, a hold: it checks
// that the key is still the one h created, and writes it again, on a
// pinned lease granted now when the call pinned one; the revision of that
// write is the hold's fence. It sets h.lease. A key that is gone makes it
// return errGone.
func (l *Locker) confirm(ctx context.Context, c call, h *hold, ls *lease) error {
	kls := ls
	if !c.renew {
		var err error
		if kls, err = newLease(ctx, l.cli, c.opts.TTL, false, &l.wg, nil); err != nil {
			l.forget(ctx, h.name, ls)
			return fmt.Errorf("grant a lease: %w", err)
		}
	}
	closePinned := func() {
		if kls != ls {
			l.dropLease(ctx, kls)
		}
	}
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)).
		Then(clientv3.OpPut(h.name, h.value(), clientv3.WithLease(kls.id))).Commit()
	if err != nil {
		l.forget(ctx, h.name, ls)
		closePinned()
		return err
	}
	if !resp.Succeeded {
		closePinned()
		return errGone
	}
	h.fence = resp.Header.Revision
	h.setLease(kls)
	return nil
}

// admit registers h, whose key is admitted on ls, as held.
func (l *Locker) admit(ctx context.Context, h *hold, ls *lease) (dlock.Lock, error) {
	h.setLease(ls)
	if err := h.tbl.Add(h); err != nil { // closed: give it back
		l.withdraw(context.WithoutCancel(ctx), h, ls, nil)
		return nil, err
	}
	h.attach(ls)
	return h, nil
}

// withdraw deletes the key of h from the queue: it revokes ls when it is a
// pinned lease of the call's own (not the session), else deletes the key;
// with actx, the context of the call's requests, while it lives (see
// dropLease and forget).
func (l *Locker) withdraw(actx context.Context, h *hold, ls, session *lease) {
	if ls != session && !ls.renew {
		l.dropLease(actx, ls)
		return
	}
	l.forget(actx, h.name, ls)
}
