package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// Part 6 measures dlock's other primitives beside its mutex, on the same
// server in the same run: semaphores (limit 1 and 4), the two sides of a
// read-write lock and dlock.LockAll of two keys in one slot. Each is a
// system whose party acquires and releases its kind of hold with
// dlock's Redis driver and its default options.

// primKind is one primitive of part 6.
type primKind int

const (
	primMutex primKind = iota
	primSem1
	primSem4
	primWrite
	primRead
	primAll2
)

var primNames = [...]string{
	primMutex: "mutex",
	primSem1:  "semaphore, limit 1",
	primSem4:  "semaphore, limit 4",
	primWrite: "read-write lock, write",
	primRead:  "read-write lock, read",
	primAll2:  "LockAll, 2 keys in one slot",
}

// exclusive reports whether one holder at a time has the primitive's key,
// so that a hot key hands it off.
func (k primKind) exclusive() bool { return k != primSem4 && k != primRead }

// primSystems are the systems of part 6: the mutex first, the reference
// of its ratios.
func primSystems() []system {
	var s []system
	for k := range primNames {
		s = append(s, primSys{primKind(k)})
	}
	return s
}

// primHotSystems are the systems of part 6 that hand a hot key off.
func primHotSystems() []system {
	var s []system
	for _, sys := range primSystems() {
		if sys.(primSys).kind.exclusive() {
			s = append(s, sys)
		}
	}
	return s
}

type primSys struct{ kind primKind }

func (s primSys) name() string { return primNames[s.kind] }

func (s primSys) party(e endpoint, rtt *counter) (party, error) {
	p, err := dlockSys{}.party(e, rtt)
	if err != nil {
		return nil, err
	}
	return &primParty{dlockParty: p.(*dlockParty), kind: s.kind}, nil
}

// primParty is a dlock party that takes its primitive's hold: TryLock or
// Lock and their counterparts (TryAcquire, TryWLock, TryLockAll, ...).
type primParty struct {
	*dlockParty
	kind primKind
}

func (p *primParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	l, o := p.l, p.options(ttl)
	var (
		lk  dlock.Lock
		err error
	)
	switch p.kind {
	case primMutex:
		return p.dlockParty.lock(ctx, key, ttl, wait)
	case primSem1, primSem4:
		if wait {
			lk, err = l.Acquire(ctx, key, p.limit(), o...)
		} else {
			lk, err = l.TryAcquire(ctx, key, p.limit(), o...)
		}
	case primWrite:
		if wait {
			lk, err = l.WLock(ctx, key, o...)
		} else {
			lk, err = l.TryWLock(ctx, key, o...)
		}
	case primRead:
		if wait {
			lk, err = l.RLock(ctx, key, o...)
		} else {
			lk, err = l.TryRLock(ctx, key, o...)
		}
	default:
		if wait {
			lk, err = dlock.LockAll(ctx, l, allKeys(key), o...)
		} else {
			lk, err = dlock.TryLockAll(ctx, l, allKeys(key), o...)
		}
	}
	if err != nil {
		return nil, err
	}
	return &dlockLock{lk: lk}, nil
}

func (p *primParty) limit() int {
	if p.kind == primSem4 {
		return 4
	}
	return 1
}

// allKeys are the two keys of a LockAll cell: one hash tag, one slot.
func allKeys(key string) []string { return []string{"{" + key + "}:a", "{" + key + "}:b"} }

// primContenders is the number of contenders of part 6's hot key.
const primContenders = 8

// measurePrims runs part 6 on the server of t.
func measurePrims(ctx context.Context, cfg config, t *target, res *results) error {
	us := primSystems()
	res.primSystems = names(us)
	var err error
	if res.prims, err = uncontendedCells(ctx, cfg, t, us, cfg.primRepeats, namePrims); err != nil {
		return err
	}
	hs := primHotSystems()
	res.primHotSystems = names(hs)
	if res.primsHot, err = hotCells(ctx, cfg, t, hs, cfg.primRepeats, []int{primContenders}); err != nil {
		return fmt.Errorf("primitives, hot key: %w", err)
	}
	return nil
}

func (r *results) part6(p printer) {
	p("## 6. Semaphores, read-write locks and multi-key locks beside the mutex")
	p("")
	p("dlock's other primitives on the server of parts 1–3, with the Redis driver's defaults (watchdog on, waiters woken")
	p("on release), %d repeat%s. Every hold is a lease of its own, renewed by the watchdog in the mutex's batches. The", r.cfg.primRepeats, plural(r.cfg.primRepeats))
	p("semaphore's and the read-write lock's holds live in a sorted set per key, so their scripts do more than the")
	p("mutex's `SET NX PX`; `LockAll` of two keys with one hash tag (one Cluster slot) takes both in one script call and")
	p("releases both in one.")
	p("")
	p("**Uncontended**: as part 1, each goroutine on a key of its own, one attempt per cycle (`TryLock`,")
	p("`TryAcquire(key, n)`, `TryWLock`, `TryRLock`, `dlock.TryLockAll`) and its release. × mutex: this primitive's")
	p("cycles/s over the mutex's in the same repeat.")
	p("")
	p("| primitive | goroutines | cycles/s | × mutex | allocs/cycle | round trips/cycle | Redis cmds/cycle |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, g := range r.cfg.goroutines {
		ref := rates(cellsOf(r.prims, ukey, primNames[primMutex], g))
		for _, s := range r.primSystems {
			cs := cellsOf(r.prims, ukey, s, g)
			p("| %s | %d | %s | %s | %s | %s | %s |", s, g,
				fmtStat(collect(cs, cell.rate), f0), fmtStat(ratio(cs, ref), f2),
				f1(collect(cs, cell.allocsPer).med), f2(collect(cs, cell.rttPer).med), f2(collect(cs, cell.cmdsPer).med))
		}
	}
	p("")
	p("**Hand-off**: a hot key as in part 2, %d contenders on clients of their own, each holding %v; the waiting forms", primContenders, r.cfg.hold)
	p("(`Lock`, `Acquire`, `WLock`, `dlock.LockAll`). Shared holds (a semaphore of limit 4, read locks) are not handed")
	p("off one at a time, and have no row here.")
	p("")
	p("| primitive | acquisitions/s | hand-off p50 | hand-off p99 | round trips/acq | allocs/acq | overlaps |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.primHotSystems {
		cs := cellsOf(r.primsHot, hkey, s, primContenders)
		var overlaps int64
		for _, c := range cs {
			overlaps += c.overlaps
		}
		p("| %s | %s | %s | %s | %s | %s | %d |", s,
			fmtStat(collect(cs, func(c hotCell) float64 { return c.rate() }), f0),
			fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.5).Seconds() }), ms),
			fmtStat(collect(cs, func(c hotCell) float64 { return c.quantile(0.99).Seconds() }), ms),
			f2(collect(cs, func(c hotCell) float64 { return c.rttPer() }).med),
			f1(collect(cs, func(c hotCell) float64 { return c.allocsPer() }).med),
			overlaps)
	}
	p("")
	p("A waiting `LockAll` whose first, all-at-once attempt finds a key busy takes the keys one by one in their order,")
	p("queueing on each busy key as `Lock` does (so that it keeps its place in each key's queue): under contention it")
	p("costs that first attempt more than two `Lock` calls.")
	p("")
}
