package faults

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ms is a CLOCK_MONOTONIC reading n milliseconds into a made-up history
// (which, like a real one, does not start at zero).
func ms(n int) int64 { return int64(time.Hour) + int64(n)*int64(time.Millisecond) }

// seq is the events of hold id ("<worker>.<incarnation>.<seq>"): a Lock
// call at start, acquired at acq, holding keys (each with its fence) as
// kind, released from rel to relok.
func seq(id string, start, acq int, kind string, keys map[string]uint64, rel, relok int) []event {
	w, _ := strconv.Atoi(id[:strings.IndexByte(id, '.')])
	var fence uint64
	for _, f := range keys {
		fence = max(fence, f)
	}
	return []event{
		{E: "start", Hold: id, T: ms(start), Worker: w},
		{E: "acq", Hold: id, T: ms(acq), Kind: kind, Keys: keys, Fence: fence, Worker: w},
		{E: "rel", Hold: id, T: ms(rel), Worker: w},
		{E: "relok", Hold: id, T: ms(relok), Worker: w},
	}
}

// lockSeq is seq for a lock of the key "faults".
func lockSeq(id string, start, acq int, fence uint64, rel, relok int) []event {
	return seq(id, start, acq, exclusive, map[string]uint64{"faults": fence}, rel, relok)
}

// wr is a write the store received at ms(at) for key "faults", for a lock
// (exclusive) unless kind says otherwise.
func wr(hold string, fence uint64, at int, accepted bool, kind ...string) write {
	w := write{Hold: hold, Key: "faults", Kind: exclusive, Fence: fence, At: ms(at), Accepted: accepted}
	if len(kind) > 0 {
		w.Kind = kind[0]
	}
	return w
}

// lostRelease is events with the release of hold id failed, as dlock
// reports the release of a hold whose lease ran out while its worker was
// paused.
func lostRelease(events []event, id string) []event {
	events = slices.Clone(events)
	for i, e := range events {
		if e.E == "relok" && e.Hold == id {
			events[i].Err = "dlock: lock lost"
		}
	}
	return events
}

func cat(parts ...[]event) []event {
	var all []event
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// A history of two holds one after the other is clean; each kind of
// violation in a made-up history is counted.
func TestCheck(t *testing.T) {
	cfg := Config{TTL: time.Second, Wait: 2 * time.Second}
	clean := cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 2, 52, 11, 90, 91))
	writes := []write{wr("0.0.0", 10, 20, true), wr("0.0.0", 10, 40, true), wr("1.0.0", 11, 60, true), wr("1.0.0", 11, 80, true)}
	r := check(cfg, history{events: clean, writes: writes})
	if !r.OK() || r.Holds != 2 || r.Overlaps != 0 || r.Fenced != 0 || r.LateLoss != 0 {
		t.Fatalf("a clean history: %s", r)
	}

	// 0.0.0 paused past its lease: 1.0.0 took the lock (fence 11) and
	// wrote; 0.0.0's late write was refused, and its loss came late.
	paused := cat(lostRelease(lockSeq("0.0.0", 0, 1, 10, 3000, 3001), "0.0.0"), lockSeq("1.0.0", 2, 1500, 11, 1600, 1601),
		[]event{{E: "done", Hold: "0.0.0", T: ms(2999), Lost: true, Worker: 0}})
	writes = []write{wr("0.0.0", 10, 20, true), wr("1.0.0", 11, 1550, true), wr("0.0.0", 10, 2999, false)}
	r = check(cfg, history{events: paused, writes: writes})
	if !r.OK() || r.Overlaps != 1 || r.Fenced != 1 || r.LateLoss != 1 {
		t.Fatalf("a paused holder stopped by the fence: %s", r)
	}

	// The same without a fence check: interleaved accepted writes, and a
	// fence that did not grow.
	writes = []write{wr("0.0.0", 10, 20, true), wr("1.0.0", 10, 1550, true), wr("0.0.0", 10, 2999, true)}
	unfenced := cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 52, 60, 10, 90, 91))
	r = check(cfg, history{events: unfenced, writes: writes})
	if r.Unsafe != 1 || r.Regressions != 1 || r.Linearizable != "no" || r.OK() || len(r.Violations) != 2 || len(r.Impasses) != 1 {
		t.Fatalf("interleaved writes and a repeated fence: %s", r)
	}

	// A Lock call of 10s with a 2s wait is stuck, unless its worker was
	// paused meanwhile.
	stuck := []event{{E: "start", Hold: "2.0.0", T: ms(0), Worker: 2}, {E: "fail", Hold: "2.0.0", T: ms(10000), Busy: true, Worker: 2}}
	if r = check(cfg, history{events: stuck}); r.Stuck != 1 {
		t.Fatalf("a 10s Lock call: %s", r)
	}
	if r = check(cfg, history{events: stuck, pauses: map[int][][2]int64{2: {{ms(1000), ms(9000)}}}}); r.Stuck != 0 {
		t.Fatalf("a 10s Lock call of a paused worker: %s", r)
	}
	// The times the machine did not run the worker or the harness do not
	// count: 6s of stalls (overlapping ones counted once) leave 4s, within
	// wait + TTL + 2s; 3s leave 7s, beyond.
	stall := func(w, from, to int) event { return event{E: "stall", T: ms(from), End: ms(to), Worker: w} }
	stalled := append(slices.Clone(stuck), stall(2, 1000, 4000), stall(-1, 3000, 7000), stall(1, 7000, 9000))
	if r = check(cfg, history{events: stalled}); r.Stuck != 0 {
		t.Fatalf("a 10s Lock call stalled 6s: %s", r)
	}
	stalled = append(slices.Clone(stuck), stall(2, 1000, 4000), stall(1, 4000, 9000))
	if r = check(cfg, history{events: stalled}); r.Stuck != 1 {
		t.Fatalf("a 10s Lock call stalled 3s: %s", r)
	}
	// On etcd and PostgreSQL, a call's last request may take the driver's
	// RequestTimeout (5s): 8s with a 2s wait is within it, 10s is not.
	within := []event{stuck[0], {E: "fail", Hold: "2.0.0", T: ms(8000), Busy: true, Worker: 2}}
	for _, backend := range []string{"etcd", "postgres"} {
		on := cfg
		on.Backend = backend
		if r = check(on, history{events: within}); r.Stuck != 0 {
			t.Fatalf("an 8s Lock call on %s: %s", backend, r)
		}
		if r = check(on, history{events: stuck}); r.Stuck != 1 {
			t.Fatalf("a 10s Lock call on %s: %s", backend, r)
		}
	}
}

// Two holds whose leases were both valid overlapped in time: the lock
// granted the key twice, whatever the store saw. Not when one of them
// cannot prove its lease: its worker was paused, its release failed, or
// the server restarted empty meanwhile.
func TestCheckLeases(t *testing.T) {
	cfg := Config{TTL: time.Second, Wait: 2 * time.Second}
	twice := cat(lockSeq("0.0.0", 0, 1, 10, 500, 501), lockSeq("1.0.0", 2, 100, 11, 300, 301))
	if r := check(cfg, history{events: twice}); r.Unsafe != 1 || r.OK() {
		t.Fatalf("a key granted twice: %s", r)
	}
	paused := map[int][][2]int64{0: {{ms(50), ms(60)}}}
	if r := check(cfg, history{events: twice, pauses: paused}); r.Unsafe != 0 || r.Overlaps != 1 {
		t.Fatalf("a key granted again while its holder was paused: %s", r)
	}
	failed := cat(twice, []event{{E: "relok", Hold: "0.0.0", T: ms(501), Err: "lost", Worker: 0}})
	if r := check(cfg, history{events: failed}); r.Unsafe != 0 {
		t.Fatalf("a key granted again to a holder whose release failed: %s", r)
	}
	restart := []fault{{Kind: RestartServer, At: ms(50), End: ms(60)}}
	if r := check(cfg, history{events: twice, sched: restart}); r.Unsafe != 0 {
		t.Fatalf("a key granted again after a restart: %s", r)
	}
	if r := check(Config{CLI: "dlock"}, history{events: twice}); r.Unsafe != 0 {
		t.Fatalf("holds through dlock run, whose releases the worker cannot see: %s", r)
	}
}

// A semaphore of 3: three permits writing at once are clean; a fourth
// whose writes the store accepted meanwhile is one too many, as is a
// fourth permit granted while three valid leases held.
func TestCheckSemaphore(t *testing.T) {
	cfg := Config{Primitive: PrimSemaphore, Limit: 3, TTL: time.Second, Wait: 2 * time.Second}
	permitSeq := func(id string, acq int, fence uint64, rel int) []event {
		return seq(id, acq-1, acq, permit, map[string]uint64{"faults": fence}, rel, rel+1)
	}
	three := cat(permitSeq("0.0.0", 1, 1, 100), permitSeq("1.0.0", 2, 2, 100), permitSeq("2.0.0", 3, 3, 100), permitSeq("3.0.0", 200, 4, 300))
	var writes []write
	for i, h := range []string{"0.0.0", "1.0.0", "2.0.0", "0.0.0", "1.0.0", "2.0.0", "3.0.0", "3.0.0"} {
		writes = append(writes, wr(h, uint64(h[0]-'0'+1), 10+10*i, true, permit))
	}
	if r := check(cfg, history{events: three, writes: writes}); !r.OK() || r.Overlaps != 0 {
		t.Fatalf("three permits at once: %s", r)
	}

	// 3.0.0 granted while the three held: the leases say so; and its
	// write, accepted between two writes of each of the others, too.
	four := cat(permitSeq("0.0.0", 1, 1, 100), permitSeq("1.0.0", 2, 2, 100), permitSeq("2.0.0", 3, 3, 100), permitSeq("3.0.0", 50, 4, 60))
	writes = append(writes[:3], wr("3.0.0", 4, 55, true, permit), wr("3.0.0", 4, 56, true, permit))
	writes = append(writes, wr("0.0.0", 1, 70, true, permit), wr("1.0.0", 2, 80, true, permit), wr("2.0.0", 3, 90, true, permit))
	r := check(cfg, history{events: four, writes: writes})
	if r.Unsafe != 6 || r.Linearizable != "no" || r.OK() || r.Overlaps != 3 || len(r.Violations) != 2 || len(r.Impasses) != 1 {
		t.Fatalf("a fourth permit: %s", r)
	}

	// The same with the holder of fence 1 paused past its lease: its
	// late write was refused, and the fourth permit is no violation.
	writes[5].Accepted = false
	paused := map[int][][2]int64{0: {{ms(10), ms(65)}}}
	if r = check(cfg, history{events: lostRelease(four, "0.0.0"), writes: writes, pauses: paused}); !r.OK() || r.Fenced != 1 || r.Overlaps != 3 {
		t.Fatalf("a fourth permit after a pause: %s", r)
	}
}

// Readers overlap; a writer overlaps no one, until it downgrades.
func TestCheckRWLock(t *testing.T) {
	cfg := Config{Primitive: PrimRWLock, TTL: time.Second, Wait: 2 * time.Second}
	rw := func(id string, acq int, kind string, fence uint64, rel int) []event {
		return seq(id, acq-1, acq, kind, map[string]uint64{"faults": fence}, rel, rel+1)
	}
	readers := cat(rw("0.0.0", 1, shared, 1, 100), rw("1.0.0", 2, shared, 2, 100), rw("2.0.0", 200, exclusive, 3, 300),
		[]event{{E: "down", Hold: "2.0.0", T: ms(250), Worker: 2}, {E: "down", Hold: "2.0.0", T: ms(250), End: ms(251), Worker: 2}}, rw("3.0.0", 260, shared, 4, 300))
	writes := []write{
		wr("0.0.0", 1, 10, true, shared), wr("1.0.0", 2, 20, true, shared), wr("0.0.0", 1, 30, true, shared), wr("1.0.0", 2, 40, true, shared),
		wr("2.0.0", 3, 210, true), wr("3.0.0", 4, 270, true, shared), wr("2.0.0", 3, 280, true, shared), wr("3.0.0", 4, 290, true, shared),
	}
	if r := check(cfg, history{events: readers, writes: writes}); !r.OK() || r.Overlaps != 0 {
		t.Fatalf("readers, then a writer that downgraded and a reader beside it: %s", r)
	}

	// A writer granted while a reader held, and a reader granted while
	// a writer held; their writes accepted in between each other's.
	for _, c := range []struct {
		name   string
		first  string
		second string
	}{{"a writer beside a reader", shared, exclusive}, {"a reader beside a writer", exclusive, shared}} {
		events := cat(rw("0.0.0", 1, c.first, 1, 100), rw("1.0.0", 50, c.second, 2, 60))
		writes := []write{wr("0.0.0", 1, 10, true, c.first), wr("1.0.0", 2, 55, true, c.second), wr("0.0.0", 1, 70, true, c.first)}
		if r := check(cfg, history{events: events, writes: writes}); r.Unsafe != 2 || r.OK() {
			t.Fatalf("%s: %s", c.name, r)
		}
		// The late write of the first refused by the fence, and the first
		// paused: fenced, not unsafe.
		writes[2].Accepted = false
		paused := map[int][][2]int64{0: {{ms(20), ms(65)}}}
		if r := check(cfg, history{events: lostRelease(events, "0.0.0"), writes: writes, pauses: paused}); !r.OK() || r.Fenced != 1 {
			t.Fatalf("%s, stopped by the fence: %s", c.name, r)
		}
	}
}

// LockAll holds of disjoint keys overlap freely; holds sharing a key do
// not; and a worker that never stops is stuck.
func TestCheckMulti(t *testing.T) {
	cfg := Config{Primitive: PrimMulti, TTL: time.Second, Wait: 2 * time.Second}
	ab := map[string]uint64{"a": 1, "b": 1}
	cd := map[string]uint64{"c": 1, "d": 1}
	bc := map[string]uint64{"b": 2, "c": 2}
	keyed := func(hold, key string, fence uint64, at int) write {
		w := wr(hold, fence, at, true)
		w.Key = key
		return w
	}
	disjoint := cat(seq("0.0.0", 0, 1, exclusive, ab, 100, 101), seq("1.0.0", 0, 2, exclusive, cd, 100, 101))
	writes := []write{keyed("0.0.0", "a", 1, 10), keyed("1.0.0", "c", 1, 20), keyed("0.0.0", "a", 1, 30), keyed("1.0.0", "c", 1, 40)}
	if r := check(cfg, history{events: disjoint, writes: writes}); !r.OK() || r.Overlaps != 0 {
		t.Fatalf("disjoint keys: %s", r)
	}
	shared := cat(seq("0.0.0", 0, 1, exclusive, ab, 100, 101), seq("1.0.0", 0, 50, exclusive, bc, 60, 61))
	writes = []write{keyed("0.0.0", "b", 1, 10), keyed("1.0.0", "b", 2, 55), keyed("1.0.0", "c", 2, 56), keyed("0.0.0", "b", 1, 70)}
	if r := check(cfg, history{events: shared, writes: writes}); r.Unsafe != 2 || r.Overlaps != 1 || r.OK() {
		t.Fatalf("a key held twice: %s", r)
	}
	// A fence of b not above that of a hold of b released before.
	again := cat(seq("0.0.0", 0, 1, exclusive, ab, 10, 11), seq("1.0.0", 20, 21, exclusive, map[string]uint64{"b": 1, "c": 5}, 30, 31))
	if r := check(cfg, history{events: again}); r.Regressions != 1 || r.OK() {
		t.Fatalf("a repeated fence of one key: %s", r)
	}
	hung := []event{{E: "start", Hold: "2.0.7", T: ms(0), Worker: 2}}
	if r := check(cfg, history{events: hung, hung: map[string]bool{"2.0": true}}); r.Stuck != 1 || r.OK() {
		t.Fatalf("a worker that never stopped: %s", r)
	}
}

// The store's rules for each kind of hold, by fence.
func TestStoreRules(t *testing.T) {
	k := &keyState{slots: map[uint64]string{}, evicted: map[uint64]bool{}}
	steps := []struct {
		kind  string
		hold  string
		fence uint64
		want  bool
	}{
		{shared, "r1", 5, true}, {shared, "r2", 6, true}, {shared, "r1", 5, true}, // readers pass one another
		{exclusive, "w0", 4, false}, // a writer below a reader
		{exclusive, "w1", 7, true},
		{shared, "r2", 6, false},                            // a reader below the writer
		{exclusive, "w1", 7, true}, {shared, "w1", 7, true}, // the writer downgraded
	}
	for i, s := range steps {
		if got := k.accept(s.kind, s.hold, s.fence, 0); got != s.want {
			t.Fatalf("read-write step %d (%s %s fence %d): accepted %v", i, s.kind, s.hold, s.fence, got)
		}
	}

	k = &keyState{slots: map[uint64]string{}, evicted: map[uint64]bool{}}
	steps = []struct {
		kind  string
		hold  string
		fence uint64
		want  bool
	}{
		{permit, "p3", 3, true}, {permit, "p1", 1, true}, // a free slot takes a low fence
		{permit, "p0", 0, false}, // below every slot of a full store
		{permit, "p4", 4, true},  // evicts fence 1
		{permit, "p1", 1, false}, // and its holder is shut out
		{permit, "p3", 3, true},
	}
	for i, s := range steps {
		if got := k.accept(s.kind, s.hold, s.fence, 2); got != s.want {
			t.Fatalf("permit step %d (%s fence %d): accepted %v", i, s.hold, s.fence, got)
		}
	}
	k.free(func(h string) bool { return h == "p3" })
	if !k.accept(permit, "p2", 2, 2) || k.accept(permit, "p1", 1, 2) {
		t.Fatalf("a slot given back takes a new permit, not an evicted one: %v", k.slots)
	}
}

// A RunOnce run must keep its key for its hold from its call, even when
// it returned at once: a run granted within it is counted, unless a server
// restarted empty meanwhile.
func TestCheckRunOnceHold(t *testing.T) {
	cfg := Config{TTL: time.Second, Primitive: PrimRunOnce}
	early := cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 1500, 1501, 11, 1550, 1551))
	if r := check(cfg, history{events: early}); r.Unsafe != 1 || r.OK() || !strings.Contains(r.String(), "within its hold") {
		t.Errorf("a run 1.5s after the previous one's call, within its hold of 2s: %s", r)
	}
	late := cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 2000, 2001, 11, 2050, 2051))
	if r := check(cfg, history{events: late}); r.Unsafe != 0 || !r.OK() {
		t.Errorf("a run after the previous one's hold: %s", r)
	}
	restart := []fault{{Kind: RestartServer, At: ms(100), End: ms(200)}}
	if r := check(cfg, history{events: early, sched: restart}); r.Unsafe != 0 {
		t.Errorf("a run after a restart that lost the data: %s", r)
	}
	kill := []fault{{Kind: KillServer, At: ms(100), End: ms(1400)}}
	cfg.Backend = "redis"
	if r := check(cfg, history{events: early, sched: kill}); r.Unsafe != 0 {
		t.Errorf("a run after one redis-server was killed: %s", r)
	}
	cfg.Backend = "redlock"
	if r := check(cfg, history{events: early, sched: kill}); r.Unsafe != 1 {
		t.Errorf("a run after one of Redlock's masters was killed and restarted after its delay: %s", r)
	}
	cfg.Backend = "postgres"
	if r := check(cfg, history{events: early, sched: kill}); r.Unsafe != 1 {
		t.Errorf("a run after PostgreSQL was killed and recovered its data: %s", r)
	}
}
