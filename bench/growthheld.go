package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// heldGrowth is one Locker holding locks locks for a window.
type heldGrowth struct {
	backend string
	want    int // the locks the step meant to hold
	locks   int // the locks it held
	acquire time.Duration
	settle  time.Duration // from the last acquisition until the requests fell to the renewals' pace; -1: they did not within settleLimit
	window  time.Duration
	client  time.Duration // this process's CPU over the window
	server  time.Duration // the server's CPU over the window; -1: it runs in this process
	// serverBytes is the growth of the server's memory (Redis) or store
	// (etcd, PostgreSQL) since no lock was held; clientBytes the growth of
	// this process's live heap.
	serverBytes, clientBytes int64
	cmds                     int64  // what the server ran in the window (see cmdsUnit)
	cmdsUnit                 string // what cmds counts
	lost                     int
}

func (h heldGrowth) perLock(x float64) float64 { return x / float64(max(h.locks, 1)) }

// clientPerLock and serverPerLock are CPU per held lock, in µs per second
// of holding.
func (h heldGrowth) clientPerLock() float64 {
	return h.perLock(float64(h.client.Microseconds()) / h.window.Seconds())
}

func (h heldGrowth) serverPerLock() float64 {
	if h.server < 0 {
		return -1
	}
	return h.perLock(float64(h.server.Microseconds()) / h.window.Seconds())
}

func (h heldGrowth) clientCores() float64 { return h.client.Seconds() / h.window.Seconds() }
func (h heldGrowth) cmdsPerSec() float64  { return float64(h.cmds) / h.window.Seconds() }

// gauge is what a backend's server reports: CPU (-1 when it runs in this
// process), memory or store size, and its count of commands.
type gauge struct {
	cpu   time.Duration
	bytes int64
	cmds  int64
}

// holder is one backend's Locker in the held-lock steps, made with the
// part's TTL as its default: its locks are taken with no option, the
// library's common way.
type holder struct {
	name     string
	l        dlock.Locker
	read     func(context.Context) (gauge, error)
	cmdsUnit string
	// perLock says whether the renewals send commands per lock (Redis: a
	// token-checked PEXPIRE each) rather than a few per tick for all
	// (etcd's one session lease, PostgreSQL's one UPDATE).
	perLock bool
}

// growHeld has h take locks until it holds each number of sizes (adding to
// those it holds), and measures every number over cfg.window. A step that
// cannot take its locks within cfg.acquire measures what it reached and
// ends the steps. It returns the locks held, for the caller to release.
func growHeld(ctx context.Context, cfg config, h holder, sizes []int, run *growthRun) ([]dlock.Lock, error) {
	g := cfg.growth
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	base, err := h.read(ctx)
	if err != nil {
		return nil, err
	}
	locks := make([]dlock.Lock, sizes[len(sizes)-1])
	taken := 0
	for _, size := range sizes {
		actx, cancel := context.WithTimeout(ctx, g.acquire)
		t0 := time.Now()
		var got atomic.Int64
		from := taken
		err := parallel(64, size-from, func(j int) error {
			i := from + j
			var (
				lk  dlock.Lock
				err error
			)
			key := "grow:" + strconv.Itoa(i)
			lk, err = h.l.TryLock(actx, key)
			for range 2 { // a timeout under load is worth another try
				if err == nil || actx.Err() != nil {
					break
				}
				// The failed attempt may have taken the lock: the retry
				// waits until the driver gives it back or its lease ends.
				lk, err = h.l.Lock(actx, key, dlock.WithWait(g.ttl))
			}
			if err != nil {
				return err
			}
			locks[i] = lk
			got.Add(1)
			return nil
		})
		short := actx.Err() != nil
		cancel()
		acquire := time.Since(t0)
		if err != nil && !short {
			return locks, fmt.Errorf("%s: take %d locks: %w", h.name, size, err)
		}
		taken = from + int(got.Load())
		if short {
			run.notes = append(run.notes, fmt.Sprintf("%s took %d of %d locks within %v (%.0f/s); the step measures those and the larger ones were not tried.",
				h.name, taken, size, g.acquire, float64(taken-from)/acquire.Seconds()))
		}
		cfg.logf("growth  held  %-26s %8d locks  taken in %v", h.name, taken, acquire.Round(time.Millisecond))

		// The window measures holding, not the work that taking left
		// behind: requests still queued (etcd sends each hold's watch
		// after the acquisition returns) and garbage.
		settled, err := settle(ctx, h)
		if err != nil {
			return locks, err
		}
		if settled < 0 {
			run.notes = append(run.notes, fmt.Sprintf("%s with %d locks still sent more than its keep-alives %v after taking them; the window started then.",
				h.name, taken, settleLimit))
		}
		debug.FreeOSMemory()
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		s0, err := h.read(ctx)
		if err != nil {
			return locks, err
		}
		c0, w0 := processCPU(), time.Now()
		select {
		case <-ctx.Done():
			return locks, ctx.Err()
		case <-time.After(g.window):
		}
		c1, w1 := processCPU(), time.Now()
		s1, err := h.read(ctx)
		if err != nil {
			return locks, err
		}
		row := heldGrowth{backend: h.name, want: size, locks: taken, acquire: acquire, settle: settled, window: w1.Sub(w0), client: c1 - c0,
			server: s1.cpu - s0.cpu, serverBytes: s1.bytes - base.bytes, clientBytes: int64(ms1.HeapInuse) - int64(ms0.HeapInuse),
			cmds: s1.cmds - s0.cmds, cmdsUnit: h.cmdsUnit}
		if s0.cpu < 0 {
			row.server = -1
		}
		for _, lk := range locks[:from+int(got.Load())] {
			if lk == nil {
				continue
			}
			select {
			case <-lk.Done():
				row.lost++
			default:
			}
		}
		cfg.logf("growth  held  %-26s %8d locks  client %.3f cores  server %v  %.0f %s/s  %d B/lock on the server  %d lost",
			h.name, row.locks, row.clientCores(), row.server, row.cmdsPerSec(), h.cmdsUnit, int64(row.perLock(float64(row.serverBytes))), row.lost)
		run.held = append(run.held, row)
		if short {
			break
		}
	}
	return locks, nil
}

// settleLimit bounds how long settle waits.
const settleLimit = 30 * time.Second

// settle waits until h's server has counted, for settleQuiet, no more
// than a few commands in each settleTick, and returns how long that took,
// or -1 after settleLimit. The quiet spell outlasts the second after which
// an etcd hold starts watching its key. A holder whose renewals send
// commands per lock (in batches, so in bursts) has nothing left to send
// after its acquisitions and does not wait.
func settle(ctx context.Context, h holder) (time.Duration, error) {
	const (
		settleTick = 500 * time.Millisecond
		pace       = 20 // a keep-alive, a renewal statement, the readings
	)
	if h.perLock {
		return 0, nil
	}
	const settleQuiet = 2 * time.Second
	t0 := time.Now()
	prev, err := h.read(ctx)
	if err != nil {
		return 0, err
	}
	quiet := time.Duration(0)
	for time.Since(t0) < settleLimit {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(settleTick):
		}
		cur, err := h.read(ctx)
		if err != nil {
			return 0, err
		}
		if float64(cur.cmds-prev.cmds) > pace {
			quiet = 0
		} else if quiet += settleTick; quiet >= settleQuiet {
			return time.Since(t0), nil
		}
		prev = cur
	}
	return -1, nil
}

// releaseAll unlocks every lock of locks from 64 goroutines.
func releaseAll(ctx context.Context, locks []dlock.Lock) error {
	var n atomic.Int64
	var first atomic.Pointer[error]
	parallel(64, len(locks), func(i int) error {
		if locks[i] == nil {
			return nil
		}
		if err := locks[i].Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
			n.Add(1)
			first.CompareAndSwap(nil, &err)
		}
		return nil
	})
	if e := first.Load(); e != nil {
		return fmt.Errorf("%d unlocks failed, the first: %w", n.Load(), *e)
	}
	return nil
}

// redisGauge reads the CPU, used_memory and total_commands_processed of
// the server of c.
func redisGauge(ctx context.Context, c *redis.Client) (gauge, error) {
	txt, err := c.Info(ctx, "cpu", "memory", "stats").Result()
	if err != nil {
		return gauge{}, fmt.Errorf("INFO: %w", err)
	}
	var g gauge
	var cpu float64
	sc := bufio.NewScanner(strings.NewReader(txt))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(val, 64)
			cpu += f
		case "used_memory":
			g.bytes, _ = strconv.ParseInt(val, 10, 64)
		case "total_commands_processed":
			g.cmds, _ = strconv.ParseInt(val, 10, 64)
		}
	}
	g.cpu = time.Duration(cpu * float64(time.Second))
	return g, nil
}
