package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refresh is a renewal of hold id called at ms(from), returned at ms(to),
// failed with err when err is not empty.
func refresh(id string, from, to int, err string) event {
	return event{E: "refresh", Hold: id, T: ms(from), End: ms(to), Err: err, Worker: workerOf(id)}
}

func workerOf(id string) int { return int(id[0] - '0') }

// failed is a Lock call of hold id from ms(start) to ms(end) that did not
// acquire: busy, or with an outcome it did not learn.
func failed(id string, start, end int, busy bool) []event {
	return []event{
		{E: "start", Hold: id, T: ms(start), Kind: exclusive, Keys: map[string]uint64{"faults": 0}, Worker: workerOf(id)},
		{E: "fail", Hold: id, T: ms(end), Busy: busy, Worker: workerOf(id)},
	}
}

// acquiredOnly is a hold of the lock acquired at ms(acq) whose worker was
// killed before it released it.
func acquiredOnly(id string, start, acq int, fence uint64) []event {
	return lockSeq(id, start, acq, fence, 0, 0)[:2]
}

// linCase is a made-up history and the verdict the check must give.
type linCase struct {
	name   string
	cfg    Config
	events []event
	sched  []fault
	want   string // yes or no
	stuck  string // for no: what the report says no order takes
}

func runLinCases(t *testing.T, cases []linCase) {
	t.Helper()
	for _, c := range cases {
		if c.cfg.TTL == 0 {
			c.cfg.TTL, c.cfg.Wait = time.Second, 2*time.Second
		}
		r := check(c.cfg, history{events: c.events, sched: c.sched})
		if r.Linearizable != c.want {
			t.Errorf("%s: linearizable %s, want %s:\n%s", c.name, r.Linearizable, c.want, r)
			continue
		}
		if c.want == "no" && (r.OK() || len(r.Impasses) != 1 || !strings.Contains(r.Impasses[0], c.stuck)) {
			t.Errorf("%s: want a failed report naming %q:\n%s", c.name, c.stuck, r)
			continue
		}
		if c.want == "no" {
			t.Logf("%s:\n%s", c.name, r.Impasses[0])
		}
	}
}

// Each kind of violation, in a made-up history of a lock (TTL 1s): the
// check finds no order the lock allows.
func TestLinearizableViolations(t *testing.T) {
	runLinCases(t, []linCase{{
		// Both released without error: each held the lock all along.
		name:   "two holders",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 500, 501), lockSeq("1.0.0", 2, 100, 11, 300, 301)),
		want:   "no", stuck: "release",
	}, {
		// 0.0.0 renewed at 5ms, then its worker died: its lease lasts
		// until about 1s, and 1.0.0 got the lock at 400ms.
		name:   "two holders, one of them in a renewed lease",
		events: cat(acquiredOnly("0.0.0", 0, 1, 10), []event{refresh("0.0.0", 5, 6, "")}, lockSeq("1.0.0", 2, 400, 11, 450, 451)),
		want:   "no", stuck: "0.0.0's refresh",
	}, {
		name:   "a fence that repeats",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 60, 61, 10, 90, 91)),
		want:   "no", stuck: "1.0.0's acquire",
	}, {
		name:   "a fence that goes back",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), lockSeq("1.0.0", 60, 61, 9, 90, 91)),
		want:   "no", stuck: "1.0.0's acquire",
	}, {
		// 0.0.0's lease ran out (no renewal), 1.0.0 took the lock and
		// released it; then 0.0.0's release reported success, a
		// release of a lock it no longer had.
		name:   "a release that did not happen",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 2000, 2001), lockSeq("1.0.0", 2, 1500, 11, 1700, 1701)),
		want:   "no", stuck: "0.0.0's release",
	}, {
		// The server said 0.0.0's hold was gone at 400ms, inside the
		// lease its renewal at 5ms gave it.
		name: "a loss the server signalled inside a renewed lease",
		events: cat(lostRelease(lockSeq("0.0.0", 0, 1, 10, 500, 501), "0.0.0"), []event{refresh("0.0.0", 5, 6, ""),
			{E: "done", Hold: "0.0.0", T: ms(400), Lost: true, Taken: true}}),
		want: "no", stuck: "0.0.0's lost",
	}, {
		// Epochs of an election are fences: a leader elected after
		// another resigned, with an epoch below.
		name:   "a leadership whose epoch goes back",
		cfg:    Config{Primitive: PrimElection},
		events: cat(lockSeq("0.0.0", 0, 1, 7, 50, 51), lockSeq("1.0.0", 60, 61, 6, 90, 91)),
		want:   "no", stuck: "1.0.0's acquire",
	}})
}

// The other primitives' rules: a fourth permit of a semaphore of three,
// a writer beside a reader, a reader beside a writer, a write lock that
// downgraded while another writer held.
func TestLinearizablePrimitives(t *testing.T) {
	sem := Config{Primitive: PrimSemaphore, Limit: 3}
	rw := Config{Primitive: PrimRWLock}
	hold := func(id string, acq int, kind string, fence uint64, rel int) []event {
		return seq(id, acq-1, acq, kind, map[string]uint64{"faults": fence}, rel, rel+1)
	}
	permits := cat(hold("0.0.0", 1, permit, 1, 100), hold("1.0.0", 2, permit, 2, 100), hold("2.0.0", 3, permit, 3, 100))
	down := []event{{E: "down", Hold: "0.0.0", T: ms(20), End: ms(21), Worker: 0}}
	runLinCases(t, []linCase{
		{name: "three permits", cfg: sem, events: permits, want: "yes"},
		{name: "a fourth permit", cfg: sem, events: cat(permits, hold("3.0.0", 50, permit, 4, 60)), want: "no", stuck: "release"},
		{name: "a fourth permit after a release", cfg: sem, events: cat(permits, hold("3.0.0", 150, permit, 4, 160)), want: "yes"},
		{name: "readers", cfg: rw, events: cat(hold("0.0.0", 1, shared, 1, 100), hold("1.0.0", 2, shared, 2, 100)), want: "yes"},
		{name: "a writer beside a reader", cfg: rw, events: cat(hold("0.0.0", 1, shared, 1, 100), hold("1.0.0", 50, exclusive, 2, 60)), want: "no", stuck: "release"},
		{name: "a reader beside a writer", cfg: rw, events: cat(hold("0.0.0", 1, exclusive, 1, 100), hold("1.0.0", 50, shared, 2, 60)), want: "no", stuck: "release"},
		{name: "a reader beside a writer that downgraded", cfg: rw, events: cat(hold("0.0.0", 1, exclusive, 1, 100), down, hold("1.0.0", 50, shared, 2, 60)), want: "yes"},
		// The writer renewed its lease, then died in a Downgrade call that
		// the server carried out: the readers it let in are no violation,
		// and without the call on record they are.
		{name: "readers after a writer killed in its downgrade", cfg: rw, events: cat(acquiredOnly("0.0.0", 0, 1, 1), []event{refresh("0.0.0", 10, 20, ""),
			{E: "down", Hold: "0.0.0", T: ms(30), Worker: 0}}, hold("1.0.0", 50, shared, 2, 60)), want: "yes"},
		{name: "readers after a writer killed, with no downgrade", cfg: rw, events: cat(acquiredOnly("0.0.0", 0, 1, 1), []event{refresh("0.0.0", 10, 20, "")},
			hold("1.0.0", 50, shared, 2, 60)), want: "no", stuck: "0.0.0's refresh"},
		{name: "a downgrade of a write lock that another took", cfg: rw, events: cat(lostRelease(hold("0.0.0", 1, exclusive, 1, 1900), "0.0.0"),
			hold("1.0.0", 1500, exclusive, 2, 1600), []event{{E: "down", Hold: "0.0.0", T: ms(1700), End: ms(1701), Worker: 0}}), want: "no", stuck: "0.0.0's downgrade"},
	})
}

// Histories the lock allows, with outcomes the workers did not learn: an
// operation that timed out may have taken effect or not, and the check
// must accept either.
func TestLinearizableUnknownOutcomes(t *testing.T) {
	runLinCases(t, []linCase{{
		// A Lock call that timed out may have taken the lock, with a fence
		// of its own: the next fence must only be above the last seen.
		name:   "an acquisition that timed out",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 50, 51), failed("1.0.0", 60, 70, false), lockSeq("2.0.0", 80, 81, 11, 90, 91)),
		want:   "yes",
	}, {
		// 0.0.0's release timed out: it may have released the lock, and
		// 1.0.0 took it at once.
		name:   "a release that timed out",
		events: cat(lostRelease(lockSeq("0.0.0", 0, 1, 10, 50, 51), "0.0.0"), lockSeq("1.0.0", 55, 60, 11, 90, 91)),
		want:   "yes",
	}, {
		// A renewal that timed out binds no one: 0.0.0 died, and 1.0.0
		// took the lock before a TTL from that renewal.
		name:   "a renewal that timed out",
		events: cat(acquiredOnly("0.0.0", 0, 1, 10), []event{refresh("0.0.0", 5, 900, "i/o timeout")}, lockSeq("1.0.0", 2, 400, 11, 450, 451)),
		want:   "yes",
	}, {
		// A renewed lease ends at a restart that loses the server's data;
		// the release of the wiped hold finds the key gone, which dlock
		// reports as released.
		name: "a restart that wiped a renewed lease",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 500, 501), []event{refresh("0.0.0", 5, 6, "")},
			lockSeq("1.0.0", 2, 300, 11, 350, 351)),
		sched: []fault{{Kind: RestartServer, At: ms(100), End: ms(200)}},
		want:  "yes",
	}, {
		// The same without the restart: two holders.
		name: "the same without the restart",
		events: cat(lockSeq("0.0.0", 0, 1, 10, 500, 501), []event{refresh("0.0.0", 5, 6, "")},
			lockSeq("1.0.0", 2, 300, 11, 350, 351)),
		want: "no", stuck: "0.0.0's refresh",
	}, {
		// A worker killed in its Lock call: it may hold the lock, which
		// its lease gives back.
		name:   "a Lock call cut by a kill",
		events: cat([]event{failed("0.0.0", 0, 0, false)[0]}, lockSeq("1.0.0", 10, 20, 11, 30, 31)),
		want:   "yes",
	}, {
		// The lease a renewal gave ran out: the next holder came a TTL
		// after the renewal's call.
		name:   "a grant after a renewed lease ran out",
		events: cat(acquiredOnly("0.0.0", 0, 1, 10), []event{refresh("0.0.0", 5, 6, "")}, lockSeq("1.0.0", 2, 1100, 11, 1150, 1151)),
		want:   "yes",
	}})
}

// A worker whose server is down fails its Lock calls fifty times a
// second, each an acquisition that may have taken effect: the states
// where it did are dropped at once (nothing can ask for such a hold), and
// the check stays quick.
func TestLinearizableManyUnknowns(t *testing.T) {
	events := lockSeq("0.0.0", 0, 1, 10, 5000, 5001)
	for i := range 500 {
		events = append(events, failed(fmt.Sprintf("1.0.%d", i), 2+10*i, 10+10*i, false)...)
	}
	events = append(events, lockSeq("2.0.0", 4000, 5002, 11, 5010, 5011)...)
	start := time.Now()
	runLinCases(t, []linCase{{name: "five hundred timeouts", events: events, want: "yes"}})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the check took %v", d)
	}
}

// A failing history leaves its report and porcupine's visualisation of
// where the search stopped.
func TestArtifacts(t *testing.T) {
	cfg := Config{TTL: time.Second, Wait: 2 * time.Second, Backend: "redis", Seed: 42}
	r := check(cfg, history{
		events: cat(lockSeq("0.0.0", 0, 1, 10, 500, 501), lockSeq("1.0.0", 2, 100, 11, 300, 301)),
		writes: []write{wr("0.0.0", 10, 20, true), wr("1.0.0", 11, 150, true)},
		sched:  []fault{{Kind: PauseHolder, At: ms(50), End: ms(60), Target: "worker 0"}},
	})
	if r.OK() {
		t.Fatalf("two holders: %s", r)
	}
	dir, err := r.WriteArtifacts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"report.txt", "replay with seed 42"},
		{"schedule.json", `"Kind": "pause-holder"`},
		{"history/writes.jsonl", `"Hold":"1.0.0"`},
		{"linearizability.html", "0.0.0 release faults: ok"},
		{"linearizability.html", "pause-holder"}, // the schedule's fault
	} {
		if b, err := os.ReadFile(filepath.Join(dir, c.name)); err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("artifact %s: %v, want it to contain %q", c.name, err, c.want)
		}
	}
}
