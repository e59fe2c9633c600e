package main

import (
	"bufio"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clientOptions are the options of every client the program makes: the
// same for every system, with a pool large enough that 64 goroutines never
// wait for a connection.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:         addr,
		PoolSize:     80,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
	}
}

// serverStats is what INFO says about the server's work so far.
type serverStats struct {
	calls map[string]int64 // per command, lower case, without INFO itself
	usec  map[string]int64 // per command: the microseconds Redis spent in it
	cpu   time.Duration    // used_cpu_sys + used_cpu_user
	rev   int64            // etcd: the store's revision (every write adds one)
}

func (s serverStats) total() int64 {
	var n int64
	for _, c := range s.calls {
		n += c
	}
	return n
}

// subscriptions counts the pub/sub (un)subscribe commands: clients send
// them on connections that bypass go-redis hooks, and scripts cannot.
func (s serverStats) subscriptions() int64 {
	var n int64
	for _, c := range []string{"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"} {
		n += s.calls[c]
	}
	return n
}

// sub returns the work done between earlier and s.
func (s serverStats) sub(earlier serverStats) serverStats {
	d := serverStats{calls: map[string]int64{}, usec: map[string]int64{}, cpu: s.cpu - earlier.cpu, rev: s.rev - earlier.rev}
	for k, v := range s.calls {
		if n := v - earlier.calls[k]; n > 0 {
			d.calls[k] = n
		}
	}
	for k, v := range s.usec {
		if n := v - earlier.usec[k]; n > 0 {
			d.usec[k] = n
		}
	}
	return d
}

// readStats reads INFO commandstats and INFO cpu. The INFO commands that
// the program itself sends are left out of the counts.
func readStats(ctx context.Context, c *redis.Client) (serverStats, error) {
	txt, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("INFO: %w", err)
	}
	s := serverStats{calls: map[string]int64{}, usec: map[string]int64{}}
	var cpu float64
	sc := bufio.NewScanner(strings.NewReader(txt))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			cmd := strings.TrimPrefix(name, "cmdstat_")
			if cmd == "info" {
				continue
			}
			for _, f := range strings.Split(val, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.calls[cmd] = n
				}
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.usec[cmd] = n
				}
			}
		case name == "used_cpu_sys" || name == "used_cpu_user":
			f, _ := strconv.ParseFloat(val, 64)
			cpu += f
		}
	}
	s.cpu = time.Duration(cpu * float64(time.Second))
	return s, nil
}

// sumStats reads the counters of every server of admins and adds them up.
func sumStats(ctx context.Context, admins []*redis.Client) (serverStats, error) {
	sum := serverStats{calls: map[string]int64{}, usec: map[string]int64{}}
	for _, a := range admins {
		s, err := readStats(ctx, a)
		if err != nil {
			return serverStats{}, err
		}
		for k, v := range s.calls {
			sum.calls[k] += v
		}
		for k, v := range s.usec {
			sum.usec[k] += v
		}
		sum.cpu += s.cpu
	}
	return sum, nil
}

// clientStats is what this process spent.
type clientStats struct {
	mallocs uint64
	cpu     time.Duration
	at      time.Time
}

func readClient() clientStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return clientStats{mallocs: ms.Mallocs, cpu: processCPU(), at: time.Now()}
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// meter measures one cell: the server's work, this process's allocations
// and CPU, and the wall time between start and stop.
type meter struct {
	read   func(context.Context) (serverStats, error)
	s0     serverStats
	c0     clientStats
	server serverStats
	allocs uint64
	cpu    time.Duration
	wall   time.Duration
}

func startMeter(ctx context.Context, read func(context.Context) (serverStats, error)) (*meter, error) {
	m := &meter{read: read}
	var err error
	if m.s0, err = read(ctx); err != nil {
		return nil, err
	}
	m.c0 = readClient()
	return m, nil
}

func (m *meter) stop(ctx context.Context) error {
	c1 := readClient()
	s1, err := m.read(ctx)
	if err != nil {
		return err
	}
	m.server = s1.sub(m.s0)
	m.allocs = c1.mallocs - m.c0.mallocs
	m.cpu = c1.cpu - m.c0.cpu
	m.wall = c1.at.Sub(m.c0.at)
	return nil
}

// add sums o into m.
func (m *meter) add(o *meter) {
	for k, v := range o.server.calls {
		m.server.calls[k] += v
	}
	if m.server.usec == nil {
		m.server.usec = map[string]int64{}
	}
	for k, v := range o.server.usec {
		m.server.usec[k] += v
	}
	m.server.cpu += o.server.cpu
	m.server.rev += o.server.rev
	m.allocs += o.allocs
	m.cpu += o.cpu
	m.wall += o.wall
}

// redisVersion asks the server for its version.
func redisVersion(ctx context.Context, c *redis.Client) string {
	txt, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(txt, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
