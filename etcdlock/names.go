package etcdlock

import (
	"sync"
	"sync/atomic"

	"github.com/dlock-go/dlock/driver"
)

// A Locker's holds of a key reuse one etcd key name: the session's token
// (see lease.tok) under the key's range, and under its line for a
// waiter. etcd keeps every key deleted since its last compaction in its
// index, and a transaction's condition on a range (is it empty, who is
// first) visits them all: a new name for every acquisition would make each
// one cost more than the one before, until the next compaction, as the
// range fills with the names of released holds. With one name per
// session, a key's range holds at most one name for each Locker that
// takes it.
//
// A name is reused only when no key of that name can be there: a Locker
// makes one hold of a key without owner at a time (its table says so), and
// a name whose delete is under way or pending (see forget, deleteLater,
// leaveLine) is not reused until the delete lands; meanwhile, and for
// holds with an owner (several per Locker) or on a lease of their own, an
// acquisition takes a fresh random token, as before.
//
// A release deletes its key by name, with no condition: a plain delete
// costs etcd less than a transaction, and the key it finds under that
// name is the hold's own, for a name is never taken again while a delete
// of it may still land. The Locker's table keeps the next hold of the key
// out until the release's answer came back (the delete then landed, or
// found the key gone); and a name whose delete may land later (its
// outcome is unknown, or its hold ended by another path while the delete
// was on its way) is retired: the session takes a new token (see
// lease.retire), so no later hold bears that name. A retired name costs
// one more key in the range's index, and only after a failure.

// deleting counts, by etcd key, the deletes under way or pending of keys
// that an acquisition would otherwise reuse.
type deleting struct {
	// pending counts the deletes under way, so that any answers without
	// the mutex, which every acquisition would share, while there are none.
	pending atomic.Int64
	mu      sync.Mutex
	n       map[string]int
}

// add counts a delete of name under way.
func (d *deleting) add(name string) {
	d.mu.Lock()
	if d.n == nil {
		d.n = make(map[string]int)
	}
	d.n[name]++
	d.pending.Add(1)
	d.mu.Unlock()
}

// done ends a delete that add counted.
func (d *deleting) done(name string) {
	d.mu.Lock()
	if d.n[name]--; d.n[name] <= 0 {
		delete(d.n, name)
	}
	d.pending.Add(-1)
	d.mu.Unlock()
}

// idle reports whether no delete is under way.
func (d *deleting) idle() bool { return d.pending.Load() == 0 }

// any reports whether a delete of one of names is under way.
func (d *deleting) any(names ...string) bool {
	if d.idle() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range names {
		if d.n[name] > 0 {
			return true
		}
	}
	return false
}

// tokenFor returns the token of an acquisition of c on the lease ls whose
// keys are those of the ranges given, each followed by the token: the
// session's token when the names can be reused (see above), else a new
// one.
func (l *Locker) tokenFor(c call, ls *lease, ranges ...string) string {
	if c.owner != "" || ls == nil || !ls.renew {
		return driver.NewToken()
	}
	token := ls.token()
	if l.deleting.idle() {
		return token
	}
	var buf [2]string
	names := buf[:0]
	for _, r := range ranges {
		names = append(names, r+token)
	}
	if l.deleting.any(names...) {
		return driver.NewToken()
	}
	return token
}
