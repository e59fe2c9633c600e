package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// The demo's script.
const (
	demoKey     = "report"
	demoTTL     = 2 * time.Second
	demoWorkers = 4
	demoRounds  = 3
	demoPauser  = 3 // the worker that pauses holding the lock
	demoWait    = 20 * time.Second
)

func cmdDemo(e *env, args []string) int {
	fs := flagSet(e, "demo")
	if stop, code := parseNoArgs(e, fs, "demo", args); stop {
		return code
	}
	srv, err := startDemoServer()
	if err != nil {
		fmt.Fprintf(e.stderr, "dlock demo: %v\n", err)
		return exitUnavailable
	}
	defer srv.stop()
	fmt.Fprintf(e.stdout, "dlock demo: %s\n", srv.about)

	ctx, stop := signalContext(e)
	defer stop()
	d := &demo{out: e.stdout, start: time.Now(), storeFence: 0}
	err = d.play(ctx, srv.addr)
	var sig *signalError
	switch {
	case errors.As(context.Cause(ctx), &sig):
		fmt.Fprintf(e.stderr, "dlock demo: %s\n", sig)
		return sig.code()
	case err != nil:
		fmt.Fprintf(e.stderr, "\ndlock demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// demo holds the shared state of the workers: the output, and the
// checks that the lock kept its promises. Its "store" refuses writes with
// a fence lower than one it has seen, as a fenced resource should.
type demo struct {
	out   io.Writer
	start time.Time

	mu           sync.Mutex
	holders      int         // workers inside their job now
	overlaps     int         // times a worker started a job while another was inside
	fences       []uint64    // in order of acquisition
	times        []time.Time // of the acquisitions
	storeFence   uint64      // the highest fence the store has accepted
	lastRelease  time.Time
	lastReleaser string
	paused       time.Time // when the pauser paused
}

func (d *demo) say(worker, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sayLocked(worker, format, args...)
}

func (d *demo) sayLocked(worker, format string, args ...any) {
	fmt.Fprintf(d.out, "%6.2fs  %-9s %s\n", time.Since(d.start).Seconds(), worker, fmt.Sprintf(format, args...))
}

func (d *demo) title(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\n"+format+"\n", args...)
}

// worker is one contender: its own connection and Locker, as a separate
// machine would have.
type worker struct {
	name   string
	client *redis.Client
	locker *redislock.Locker
}

func (d *demo) play(ctx context.Context, addr string) error {
	workers := make([]*worker, demoWorkers)
	for i := range workers {
		c := redis.NewClient(&redis.Options{Addr: addr})
		l, err := redislock.New(c, dlock.WithTTL(demoTTL), dlock.WithFencing(true))
		if err != nil {
			c.Close()
			return err
		}
		w := &worker{name: fmt.Sprintf("worker-%d", i+1), client: c, locker: l}
		workers[i] = w
		defer func() { w.locker.Close(); w.client.Close() }()
	}

	d.title("1. Contention: %d workers, one lock %q (lease %v, renewed every %v while held).\n"+
		"   Each job runs only while its worker holds the lock; a release hands the lock to the next waiter.",
		demoWorkers, demoKey, demoTTL, (demoTTL / 3).Round(time.Millisecond))
	var wg sync.WaitGroup
	errs := make(chan error, demoWorkers)
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range demoRounds {
				if err := d.job(ctx, w, time.Duration(120+40*i+30*r)*time.Millisecond); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}

	pauser := workers[demoPauser-1]
	d.title("2. A pause: %s takes the lock and freezes mid-job (a long GC pause, a stopped VM):\n"+
		"   it neither renews nor releases the lock. Nobody can take the lock until its lease\n"+
		"   runs out; then the next waiter gets it.", pauser.name)
	lk, err := pauser.locker.Lock(ctx, demoKey, dlock.WithWait(demoWait))
	if err != nil {
		return err
	}
	stale := lk.Fence()
	d.acquired(pauser.name, stale, time.Now())
	d.write(pauser.name, stale)
	paused := time.Now()
	pauser.locker.Orphan() // no release, no renewal: as if the process froze
	d.mu.Lock()
	d.holders-- // it does no more work (until phase 3)
	d.paused = paused
	d.mu.Unlock()
	d.say(pauser.name, "PAUSED holding fence %d; its lease ends within %v", stale, demoTTL)
	for _, w := range workers {
		if w == pauser {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.job(ctx, w, 150*time.Millisecond); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	recovered := d.firstAfter(paused)

	d.title("3. Fencing: %s wakes up, still believing it holds the lock, and writes with\n"+
		"   its fence %d. The store has seen higher fences and refuses.", pauser.name, stale)
	accepted := d.write(pauser.name, stale)

	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintln(d.out)
	rising := true
	for i := 1; i < len(d.fences); i++ {
		rising = rising && d.fences[i] > d.fences[i-1]
	}
	fmt.Fprintf(d.out, "Summary: %d acquisitions in %.1fs; fences %d..%d, strictly rising: %v;\n",
		len(d.fences), time.Since(d.start).Seconds(), d.fences[0], d.fences[len(d.fences)-1], rising)
	fmt.Fprintf(d.out, "         two holders at once: %d times; lock recovered %.1fs after the pause; stale write refused: %v.\n",
		d.overlaps, recovered.Seconds(), !accepted)
	if !rising || d.overlaps > 0 || accepted {
		return errors.New("the lock broke a promise (see the summary)")
	}
	fmt.Fprintln(d.out, "Try it across machines: dlock run --wait 1m KEY -- CMD (see `dlock help run`).")
	return nil
}

// job acquires the lock, works for length while holding it, and releases.
func (d *demo) job(ctx context.Context, w *worker, length time.Duration) error {
	asked := time.Now()
	lk, err := w.locker.Lock(ctx, demoKey, dlock.WithWait(demoWait))
	if err != nil {
		return err
	}
	d.acquired(w.name, lk.Fence(), asked)
	d.write(w.name, lk.Fence())
	t := time.NewTimer(length) // the job's work
	select {
	case <-t.C:
	case <-lk.Done():
		t.Stop()
		return fmt.Errorf("%s: %w", w.name, lk.Err())
	case <-ctx.Done():
		t.Stop()
	}
	d.released(w.name, length)
	return lk.Unlock(context.WithoutCancel(ctx))
}

// acquired records an acquisition asked for at time asked.
func (d *demo) acquired(name string, fence uint64, asked time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	waited := now.Sub(asked)
	if d.holders++; d.holders > 1 {
		d.overlaps++
	}
	d.fences = append(d.fences, fence)
	d.times = append(d.times, now)
	how := ""
	switch {
	case waited < 20*time.Millisecond:
		how = "(free)"
	case d.lastRelease.After(asked):
		how = fmt.Sprintf("(waited %.2fs; hand-off from %s in %.1fms)", waited.Seconds(), d.lastReleaser, float64(now.Sub(d.lastRelease).Microseconds())/1000)
	case !d.paused.IsZero() && asked.After(d.paused):
		how = fmt.Sprintf("(waited %.2fs; the paused holder's lease ran out)", waited.Seconds())
	default:
		how = fmt.Sprintf("(waited %.2fs)", waited.Seconds())
	}
	d.sayLocked(name, "acquired  fence %-3d %s", fence, how)
}

func (d *demo) released(name string, held time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holders--
	d.lastRelease, d.lastReleaser = time.Now(), name
	d.sayLocked(name, "released  after a %v job", held)
}

// write is a write to the fenced store; it reports whether it was taken.
func (d *demo) write(name string, fence uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fence < d.storeFence {
		d.sayLocked(name, "write with fence %d REFUSED by the store: it has seen fence %d", fence, d.storeFence)
		return false
	}
	d.storeFence = fence
	return true
}

// firstAfter is how long after t the first acquisition came.
func (d *demo) firstAfter(t time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, at := range d.times {
		if at.After(t) {
			return at.Sub(t)
		}
	}
	return 0
}
