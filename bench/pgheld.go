package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
)

// pgHeld is one way of keeping many PostgreSQL locks: the CPU it cost
// this process and the server over a window, as a share of one core, and
// the statements it sent per second.
type pgHeld struct {
	name             string
	client, server   float64 // % of a core
	stmtsPerS        float64
	locks            int
	window, interval time.Duration
}

// pgHeldLocks measures n held locks, each renewed every ttl/3, over
// window: dlock's Locker, whose watchdog renews them all in one UPDATE …
// unnest per tick, beside one renewal statement per lock per tick on
// lease rows (pglock's and river's way), from 8 goroutines.
func (e *pgEnv) pgHeldLocks(ctx context.Context, pid, n int, ttl, window time.Duration) ([]pgHeld, error) {
	key := func(i int) string { return "held:" + strconv.Itoa(i) }
	idle, err := e.pgWindow(pid, window, func(ctx context.Context) error { <-ctx.Done(); return nil })
	if err != nil {
		return nil, err
	}
	idle.name = "nothing held (the idle server and process: the baseline of the rows below)"
	out := []pgHeld{idle}

	l, err := postgreslock.New(e.pool, dlock.WithTTL(ttl))
	if err != nil {
		return nil, err
	}
	locks := make([]dlock.Lock, n)
	err = parallel(16, n, func(i int) (err error) {
		locks[i], err = l.TryLock(ctx, key(i))
		return err
	})
	if err == nil {
		var h pgHeld
		h, err = e.pgWindow(pid, window, func(ctx context.Context) error { <-ctx.Done(); return nil })
		h.name = "dlock postgreslock (the watchdog: one `UPDATE … unnest` per tick)"
		out = append(out, h)
		for _, lk := range locks {
			if lk != nil && lk.Err() != nil {
				err = fmt.Errorf("a held lock was lost: %w", lk.Err())
				break
			}
		}
	}
	l.Close()
	if err != nil {
		return nil, err
	}

	if _, err := e.pool.Exec(ctx, `INSERT INTO bench_leader (name, owner, expires_at)
SELECT 'held:' || i, 'o', now() + $2 * interval '1 millisecond' FROM generate_series(0, $1 - 1) AS i
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at`, n, ttl.Milliseconds()); err != nil {
		return nil, err
	}
	defer e.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM bench_leader WHERE name LIKE 'held:%'`)
	h, err := e.pgWindow(pid, window, func(ctx context.Context) error {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			err := parallel(8, n, func(i int) error {
				_, err := e.pool.Exec(ctx, `UPDATE bench_leader SET expires_at = now() + $3 * interval '1 millisecond' WHERE name = $1 AND owner = $2`,
					key(i), "o", ttl.Milliseconds())
				return err
			})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	h.name = "one renewal statement per lock per tick (lease rows, 8 goroutines)"
	out = append(out, h)
	for i := range out {
		out[i].locks, out[i].interval = n, ttl/3
	}
	return out, nil
}

// pgWindow runs keep for window and measures it.
func (e *pgEnv) pgWindow(pid int, window time.Duration, keep func(context.Context) error) (pgHeld, error) {
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	s0, by0 := serverCPUByKind(pid)
	c0, n0, t0 := processCPU(), e.sent.n.Load(), time.Now()
	err := keep(ctx)
	wall := time.Since(t0)
	s1, by1 := serverCPUByKind(pid)
	c1, n1 := processCPU(), e.sent.n.Load()
	if e.log != nil {
		// Where the server's share went, by process kind, for whoever
		// wants to know why a row costs what it does.
		var parts []string
		for kind, d := range by1 {
			if d -= by0[kind]; d > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f %%", kind, 100*float64(d)/float64(wall)))
			}
		}
		slices.Sort(parts)
		fmt.Fprintf(e.log, "postgres: server CPU by process: %s\n", strings.Join(parts, ", "))
	}
	return pgHeld{
		client:    100 * float64(c1-c0) / float64(wall),
		server:    100 * float64(s1-s0) / float64(wall),
		stmtsPerS: float64(n1-n0) / wall.Seconds(),
		window:    wall,
	}, err
}

// serverCPU is the user+system CPU time of the server whose postmaster is
// pid, in all (see serverCPUByKind).
func serverCPU(pid int) time.Duration {
	total, _ := serverCPUByKind(pid)
	return total
}

// serverCPUByKind is the user+system CPU time of process pid and its children
// (the postmaster's backends and helpers) so far, in all and by kind of
// process (backend, checkpointer, autovacuum worker, ...). Processes that
// ended and were reaped count in the total (the postmaster's cutime and
// cstime), as "ended".
func serverCPUByKind(pid int) (time.Duration, map[string]time.Duration) {
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	var total int64
	by := map[string]time.Duration{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:]) // state, ppid, …; utime, stime, cutime, cstime are the 12th to 15th
		if len(fields) < 15 {
			continue
		}
		self, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(filepath.Dir(f)), "/"))
		ppid, _ := strconv.Atoi(fields[1])
		if self != pid && ppid != pid {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		st, _ := strconv.ParseInt(fields[12], 10, 64)
		total += u + st
		by[pgProcessKind(self, self == pid)] += time.Duration(u+st) * tick
		if self == pid {
			cu, _ := strconv.ParseInt(fields[13], 10, 64)
			cs, _ := strconv.ParseInt(fields[14], 10, 64)
			total += cu + cs
			by["ended"] += time.Duration(cu+cs) * tick
		}
	}
	return time.Duration(total) * tick, by
}

// pgProcessKind is the kind of server process pid from its title
// ("postgres: checkpointer", "postgres: user db host(port) idle"): the
// postmaster, a backend, or the helper's name.
func pgProcessKind(pid int, postmaster bool) string {
	if postmaster {
		return "postmaster"
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	title := strings.TrimPrefix(strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " "), "postgres: ")
	for _, helper := range []string{"checkpointer", "background writer", "walwriter", "autovacuum launcher", "autovacuum worker", "logical replication launcher", "stats collector"} {
		if strings.HasPrefix(title, helper) {
			return helper
		}
	}
	return "backends"
}
