package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// columns are the columns of status, ls and top (whose live view adds
// AGE): one row per kind of hold on a key. Each is also a field of the
// --json objects of status, ls and unlock, in lower case (TTL as ttl_ms).
var columns = []string{"KEY", "KIND", "STATE", "OWNER", "HOLDS", "TTL", "FENCE", "WAITERS"}

// lockJSON is a row in the --json output of status, ls and unlock.
type lockJSON struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`  // lock, semaphore or rwlock
	State   string `json:"state"` // free, held or full
	Held    bool   `json:"held"`
	Owner   string `json:"owner,omitempty"`
	Holds   int    `json:"holds"`
	Limit   int    `json:"limit,omitempty"`   // a semaphore's
	Readers *int   `json:"readers,omitempty"` // a read-write lock's
	TTLms   int64  `json:"ttl_ms"`            // -1: the key has no expiry
	Fence   uint64 `json:"fence"`
	Waiters *int   `json:"waiters,omitempty"` // nil: not counted (etcd's locks)
}

func toJSON(i dlock.Info) lockJSON {
	ttl := i.TTL.Milliseconds()
	if i.TTL < 0 {
		ttl = -1
	}
	j := lockJSON{Key: i.Key, Kind: i.Kind.String(), State: stateOf(i), Held: i.Held, Owner: i.Owner, Holds: i.Holds,
		TTLms: ttl, Fence: i.Fence}
	if i.WaitersKnown {
		j.Waiters = &i.Waiters
	}
	switch i.Kind {
	case dlock.KindSemaphore:
		j.Limit = i.Limit
	case dlock.KindRWLock:
		j.Readers = &i.Readers
	}
	return j
}

// stateOf is the STATE of a row: free, held, or full for a semaphore
// whose every permit is out.
func stateOf(i dlock.Info) string {
	switch {
	case !i.Held:
		return "free"
	case i.Kind == dlock.KindSemaphore && i.Limit > 0 && i.Holds >= i.Limit:
		return "full"
	}
	return "held"
}

// holdsCell is the HOLDS of a row: a lock's holds (more than 1 for an
// owner's reentrant lock), a semaphore's permits out of its limit (2/3),
// a read-write lock's readers and writer (3r, 1w).
func holdsCell(i dlock.Info) string {
	switch i.Kind {
	case dlock.KindSemaphore:
		return fmt.Sprintf("%d/%d", i.Holds, i.Limit)
	case dlock.KindRWLock:
		w := i.Holds - i.Readers
		switch {
		case i.Holds == 0:
			return "0"
		case w == 0:
			return strconv.Itoa(i.Readers) + "r"
		case i.Readers == 0:
			return strconv.Itoa(w) + "w"
		}
		return fmt.Sprintf("%dw+%dr", w, i.Readers)
	}
	return strconv.Itoa(i.Holds)
}

// cells is a row of status, ls and top, in the order of columns.
func cells(i dlock.Info) []string {
	owner, ttl, fence, waiters := i.Owner, "-", "-", "-"
	if owner == "" {
		owner = "-"
	}
	if i.Held {
		ttl = leaseString(i.TTL)
	}
	if i.FenceKnown {
		fence = strconv.FormatUint(i.Fence, 10)
	}
	if i.WaitersKnown {
		waiters = strconv.Itoa(i.Waiters)
	}
	return []string{i.Key, i.Kind.String(), stateOf(i), owner, holdsCell(i), ttl, fence, waiters}
}

// printTable writes the rows under the columns' header.
func printTable(w io.Writer, infos []dlock.Info) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, i := range infos {
		fmt.Fprintln(tw, strings.Join(cells(i), "\t"))
	}
	tw.Flush()
}

// otherKinds are the kinds of hold beside a key's lock.
var otherKinds = []dlock.Kind{dlock.KindSemaphore, dlock.KindRWLock}

// sortRows orders rows by key, then kind.
func sortRows(infos []dlock.Info) {
	slices.SortStableFunc(infos, func(a, b dlock.Info) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return int(a.Kind) - int(b.Kind)
	})
}

// listAll returns every held lock, semaphore and read-write lock whose key
// matches pattern: the rows of ls and top.
func listAll(ctx context.Context, be backend, pattern string) ([]dlock.Info, error) {
	infos, err := be.List(ctx, pattern)
	if err != nil {
		return nil, err
	}
	if ki, ok := be.(driver.KindInspector); ok {
		for _, k := range otherKinds {
			more, err := ki.ListKind(ctx, k, pattern)
			if err != nil {
				return nil, err
			}
			infos = append(infos, more...)
		}
	}
	sortRows(infos)
	return infos, nil
}

// keyRows returns the rows of status KEY: each kind of hold on key that is
// held or waited for (or a semaphore that has a limit), and key's lock
// when it is held or waited for, or when there is nothing else to show.
func keyRows(ctx context.Context, be backend, key string) ([]dlock.Info, error) {
	lock, err := be.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	var rows []dlock.Info
	if ki, ok := be.(driver.KindInspector); ok {
		for _, k := range otherKinds {
			info, err := ki.InspectKind(ctx, k, key)
			if err != nil {
				return nil, err
			}
			if info.Held || info.Waiters > 0 || info.Limit > 0 {
				rows = append(rows, info)
			}
		}
	}
	if lock.Held || lock.Waiters > 0 || len(rows) == 0 {
		rows = append([]dlock.Info{lock}, rows...)
	}
	return rows, nil
}

// leaseString writes a remaining lease in at most seven characters.
func leaseString(d time.Duration) string {
	if d < 0 {
		return "never" // no expiry: not written by dlock
	}
	return short(d)
}

// short writes d in a few characters: 850ms, 9.5s, 42s, 12m03s, 3h04m.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
