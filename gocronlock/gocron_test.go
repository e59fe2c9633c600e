package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/election"
	"github.com/dlock-go/dlock/gocronlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/go-co-op/gocron/v2"
)

// locker returns a Locker of its own, as a process of its own would have,
// closed when t ends.
func locker(t *testing.T) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(server.Client(t), dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// runs counts a job's runs per tick of its schedule.
type runs struct {
	mu     sync.Mutex
	byTick map[int64][]int // tick (Unix second) -> the schedulers that ran it
}

func (r *runs) add(tick time.Time, scheduler int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byTick == nil {
		r.byTick = map[int64][]int{}
	}
	s := tick.Unix()
	r.byTick[s] = append(r.byTick[s], scheduler)
}

func (r *runs) ticks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byTick)
}

// check fails t for a tick that ran more than once.
func (r *runs) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for tick, by := range r.byTick {
		if len(by) != 1 {
			t.Errorf("tick %d ran %d times, on schedulers %v", tick, len(by), by)
		}
	}
}

// schedule starts a scheduler with opt that runs job every second, on the
// second, and shuts it down when t ends.
func schedule(t *testing.T, opt gocron.SchedulerOption, name string, job func()) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(job), gocron.WithName(name)); err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown() })
	return s
}

// Three schedulers with the Locker run a job every second: each tick runs
// once. The job is fast, and a scheduler that fires a little later than
// the others finds the tick's lock still held (at least 500ms).
func TestLockerOncePerTick(t *testing.T) {
	var r runs
	name := fmt.Sprintf("job-%d", time.Now().UnixNano())
	for i := range 3 {
		gl, err := gocronlock.NewLocker(locker(t), 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		schedule(t, gocron.WithDistributedLocker(gl), name, func() { r.add(time.Now(), i) })
	}
	dlocktest.Eventually(t, 10*time.Second, "4 ticks", func() bool { return r.ticks() >= 4 })
	r.check(t)
}

// The lock of a job outlives a fast run by the hold, and the run's lock is
// released at once when the job took longer than the hold.
func TestLockerHold(t *testing.T) {
	ctx := context.Background()
	l := locker(t)
	gl, err := gocronlock.NewLocker(l, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("hold-%d", time.Now().UnixNano())
	lk, err := gl.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := gl.Lock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock within the hold: %v, want ErrNotAcquired", err)
	}
	dlocktest.Eventually(t, 5*time.Second, "the hold to lapse", func() bool {
		info, err := l.Inspect(ctx, key)
		return err == nil && !info.Held
	})
	lk, err = gl.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond) // a job longer than the hold
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := l.Inspect(ctx, key); err != nil || info.Held {
		t.Errorf("after a run longer than the hold: %+v, %v; want free", info, err)
	}
	if _, err := gocronlock.NewLocker(nil, 0); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("NewLocker(nil): %v, want ErrNilClient", err)
	}
	if _, err := gocronlock.NewLocker(l, -time.Second); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("NewLocker with a negative hold: %v, want ErrInvalidOption", err)
	}
}

// Three schedulers with Electors: only the leader's runs the job, once per
// tick; when the leader's Elector closes, another scheduler takes over.
func TestElector(t *testing.T) {
	key := fmt.Sprintf("leader-%d", time.Now().UnixNano())
	var (
		r   runs
		els []*gocronlock.Elector
	)
	for i := range 3 {
		e, err := election.New(locker(t), key)
		if err != nil {
			t.Fatal(err)
		}
		el := gocronlock.NewElector(e, fmt.Sprintf("scheduler-%d", i))
		t.Cleanup(func() { el.Close() })
		els = append(els, el)
		schedule(t, gocron.WithDistributedElector(el), "job", func() { r.add(time.Now(), i) })
	}
	leader := func() int {
		n, who := 0, -1
		for i, el := range els {
			if el.IsLeader(context.Background()) == nil {
				n, who = n+1, i
			}
		}
		if n > 1 {
			t.Fatalf("%d Electors lead at once", n)
		}
		return who
	}
	dlocktest.Eventually(t, 10*time.Second, "a leader", func() bool { return leader() >= 0 })
	first := leader()
	dlocktest.Eventually(t, 10*time.Second, "3 ticks", func() bool { return r.ticks() >= 3 })
	if err := els[first].Close(); err != nil {
		t.Fatal(err)
	}
	if err := els[first].IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Fatalf("IsLeader after Close: %v, want ErrNotLeader", err)
	}
	dlocktest.Eventually(t, 10*time.Second, "another leader", func() bool { l := leader(); return l >= 0 && l != first })
	second := leader()
	before := r.ticks()
	dlocktest.Eventually(t, 10*time.Second, "2 more ticks", func() bool { return r.ticks() >= before+2 })
	r.check(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	ranBy := map[int]bool{}
	for _, by := range r.byTick {
		for _, s := range by {
			ranBy[s] = true
		}
	}
	for s := range ranBy {
		if s != first && s != second {
			t.Errorf("scheduler %d ran the job without leading", s)
		}
	}
	if !ranBy[second] {
		t.Errorf("the new leader, scheduler %d, ran nothing", second)
	}
}
