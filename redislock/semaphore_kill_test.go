package redislock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// workerEnv makes the test binary a worker of TestSemaphoreKilled: its
// value is the Redis address, and the other settings follow in
// DLOCK_WORKER_KEY, _LIMIT, _GOROUTINES and _UNTIL (Unix ms).
const workerEnv = "DLOCK_WORKER_REDIS"

// checkIn records that a holder works under its permit for the next step
// ms, but never past the end of the permit's lease on the server: KEYS[1]
// the set of holders at work (token -> end of the step), KEYS[2] the count
// of violations, KEYS[3] the semaphore's set. ARGV[1] token, ARGV[2] step
// in ms, ARGV[3] the limit. It returns the number at work, or -1 when the
// permit's lease has ended (the holder must stop), and counts a violation
// when more than limit are at work.
var checkIn = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]) or '0')
if lease <= now then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], math.min(now + tonumber(ARGV[2]), lease), ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n > tonumber(ARGV[3]) then redis.call('INCR', KEYS[2]) end
return n
`)

// permitWorker is a worker process: goroutines that take a permit, work
// under it in steps checked in with checkIn, and give it back, until the
// test kills the process or the deadline passes.
func permitWorker() int {
	addr, key := os.Getenv(workerEnv), os.Getenv("DLOCK_WORKER_KEY")
	limit, _ := strconv.Atoi(os.Getenv("DLOCK_WORKER_LIMIT"))
	goroutines, _ := strconv.Atoi(os.Getenv("DLOCK_WORKER_GOROUTINES"))
	untilMs, _ := strconv.ParseInt(os.Getenv("DLOCK_WORKER_UNTIL"), 10, 64)
	until := time.UnixMilli(untilMs)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	l, err := New(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	const step = 40 * time.Millisecond
	keys := []string{key + ":inside", key + ":violations", "dlock:sem:" + key}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				lk, err := l.Acquire(ctx, key, limit, dlock.WithTTL(600*time.Millisecond), dlock.WithWait(2*time.Second))
				if err != nil {
					continue
				}
			work:
				for range 3 {
					select {
					case <-lk.Done():
						break work
					default:
					}
					n, err := checkIn.Run(ctx, c, keys, lk.Token(), step.Milliseconds(), limit).Int()
					if err != nil || n < 0 {
						break
					}
					time.Sleep(step / 2) // the work
				}
				c.ZRem(ctx, keys[0], lk.Token())
				if lk.Unlock(ctx) == nil {
					c.Incr(ctx, key+":acquisitions")
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// Permits never exceed the limit with 64 contenders in 8 processes, while
// the test kills a process (SIGKILL) every 250ms and starts another, until
// 16 were killed and 20 permits were acquired and released (30s at most):
// a killed holder's permits come back when their leases end, and at every
// moment at most limit holders work.
func TestSemaphoreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		procs, goroutines, limit = 8, 8, 3
		wantKills, wantCycles    = 16, 20
		run                      = 30 * time.Second // at most: a loaded machine starts processes slowly
	)
	ctx := context.Background()
	c := shared.Client(t)
	key := keyFor(t)
	until := time.Now().Add(run + 5*time.Second) // workers stop by themselves after this
	var (
		mu      sync.Mutex
		running = map[int]*exec.Cmd{}
		next    int
	)
	start := func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			workerEnv+"="+shared.Addr(),
			"DLOCK_WORKER_KEY="+key,
			"DLOCK_WORKER_LIMIT="+strconv.Itoa(limit),
			"DLOCK_WORKER_GOROUTINES="+strconv.Itoa(goroutines),
			"DLOCK_WORKER_UNTIL="+strconv.FormatInt(until.UnixMilli(), 10))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a worker: %v", err)
		}
		mu.Lock()
		running[next] = cmd
		next++
		mu.Unlock()
	}
	kill := func(id int) {
		mu.Lock()
		cmd := running[id]
		delete(running, id)
		mu.Unlock()
		if cmd != nil {
			cmd.Process.Kill() // SIGKILL: no release, no goodbye
			cmd.Wait()
		}
	}
	t.Cleanup(func() {
		mu.Lock()
		ids := make([]int, 0, len(running))
		for id := range running {
			ids = append(ids, id)
		}
		mu.Unlock()
		for _, id := range ids {
			kill(id)
		}
	})
	for range procs {
		start()
	}
	kills := 0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	cycles := func() int { n, _ := c.Get(ctx, key+":acquisitions").Int(); return n }
	for end := time.Now().Add(run); time.Now().Before(end) && (kills < wantKills || cycles() < wantCycles); {
		<-tick.C
		mu.Lock()
		ids := make([]int, 0, len(running))
		for id := range running {
			ids = append(ids, id)
		}
		mu.Unlock()
		kill(ids[rand.IntN(len(ids))])
		kills++
		start()
	}
	mu.Lock()
	ids := make([]int, 0, len(running))
	for id := range running {
		ids = append(ids, id)
	}
	mu.Unlock()
	for _, id := range ids {
		kill(id) // every holder dies holding what it holds
	}

	violations, _ := c.Get(ctx, key+":violations").Int()
	acquisitions, _ := c.Get(ctx, key+":acquisitions").Int()
	t.Logf("%d processes killed, %d permits acquired and released, %d violations", kills, acquisitions, violations)
	if violations != 0 {
		t.Errorf("%d times more than %d holders worked at once", violations, limit)
	}
	if kills < wantKills || acquisitions < wantCycles {
		t.Errorf("%d kills and %d permits acquired and released in %v, want %d and %d: the contenders made no progress", kills, acquisitions, run, wantKills, wantCycles)
	}
	// The dead holders' permits come back when their leases end, and the
	// dead waiters' places when their claim windows do (a permit granted
	// to a dead waiter lapses with its window).
	l := newLocker(t, shared)
	dlocktest.Eventually(t, 5*time.Second, "the killed holders' permits came back", func() bool {
		info, err := l.InspectKind(ctx, dlock.KindSemaphore, key)
		return err == nil && !info.Held && info.Waiters == 0
	})
	mustHold(t)(l.TryAcquire(ctx, key, limit)).Unlock(ctx)
}
