package postgreslock

import "sync"

// knownMax is how many names a Locker remembers as having a row.
const knownMax = 4096

// known remembers names whose row is in the lease table, so that their
// acquisitions leave out the insert of a new name's row (see
// statements.acquireKnown). Rows are never deleted by the driver; a row
// deleted all the same is made again by the acquire function, so a name
// remembered wrongly costs a function call, not a wrong answer. It holds
// at most knownMax names, and forgets them all when full.
type known struct {
	mu    sync.Mutex
	names map[string]struct{}
}

// has says whether name's row was seen.
func (k *known) has(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.names[name]
	return ok
}

// add remembers that name's row is there.
func (k *known) add(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.names == nil || len(k.names) >= knownMax {
		k.names = make(map[string]struct{})
	}
	k.names[name] = struct{}{}
}
