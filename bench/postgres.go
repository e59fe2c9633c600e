package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// The PostgreSQL part (-postgres FILE): dlock's postgreslock beside
// session advisory locks (the floor), a lease row in the manner of river's
// leader table (an upsert whose expiry is the server's time) and
// cirello.io/pglock, on one server that pgtest starts with fsync on. It
// replaces the "## PostgreSQL" section of FILE, or appends one.

// pgSystem is one way to lock with PostgreSQL. A party is one goroutine's
// use of it: try takes key or reports busy, lock waits, and the returned
// function releases.
type pgSystem struct {
	name string
	open func(ctx context.Context, p *pgParty) error
	// ready, when set, readies an opened party for a hand-off cell
	// before its clock starts: what a process does once in its life. It
	// returns what to call just before the clock starts.
	ready func(ctx context.Context, p *pgParty) (func(), error)
	try   func(ctx context.Context, p *pgParty, key string) (func(), bool, error)
	lock  func(ctx context.Context, p *pgParty, key string) (func(), error)
	close func(p *pgParty)
}

// pgParty is what a system keeps for one contender or goroutine.
type pgParty struct {
	locker *postgreslock.Locker
	pgl    *pglock.Client
	conn   *pgxpool.Conn // advisory locks: the session that holds them
	owner  string
	settle func() // from ready: called just before a cell's clock starts
}

// pgTracer counts the statements a pool or database sends, and each
// statement's, by the start of its text.
type pgTracer struct {
	n     atomic.Int64
	mu    sync.Mutex
	bySQL map[string]int64
}

func (t *pgTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	k := sqlKey(d.SQL)
	t.mu.Lock()
	if t.bySQL == nil {
		t.bySQL = map[string]int64{}
	}
	t.bySQL[k]++
	t.mu.Unlock()
	return ctx
}

// sqlKey is the start of a statement's text, its white space collapsed,
// at most 48 bytes and "…" when cut. It reads only as much of the text as
// it keeps, so that the tracer costs the same for a long statement as for
// a short one, and what it adds to a cell's client CPU does not depend on
// the system measured.
func sqlKey(sql string) string {
	const most = 48
	b := make([]byte, 0, most)
	space := false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
			space = len(b) > 0
			continue
		}
		if space && len(b) < most {
			b = append(b, ' ')
		}
		if len(b) == most {
			return string(b) + "…"
		}
		b, space = append(b, c), false
	}
	return string(b)
}

// counts returns a copy of the counts by statement.
func (t *pgTracer) counts() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.bySQL)
}

func (t *pgTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// pgEnv is the server and the pools every party shares.
type pgEnv struct {
	url    string
	pid    int // the postmaster's, for the server's CPU (0: not measured)
	sent   pgTracer
	pool   *pgxpool.Pool // for every system but pglock
	db     *sql.DB       // pglock's, through pgx's database/sql driver
	poll   time.Duration // the lease row's waiters poll this often
	ttl    time.Duration
	hold   time.Duration
	cycleD time.Duration
	hotD   time.Duration
	log    io.Writer // progress and diagnostics
}

func (e *pgEnv) systems() []pgSystem {
	return []pgSystem{
		{
			name: "advisory lock (floor)",
			open: func(ctx context.Context, p *pgParty) (err error) {
				p.conn, err = e.pool.Acquire(ctx)
				return err
			},
			try: func(ctx context.Context, p *pgParty, key string) (func(), bool, error) {
				var ok bool
				if err := p.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&ok); err != nil || !ok {
					return nil, false, err
				}
				return func() { p.conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, key) }, true, nil
			},
			lock: func(ctx context.Context, p *pgParty, key string) (func(), error) {
				if _, err := p.conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, key); err != nil {
					return nil, err
				}
				return func() { p.conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, key) }, nil
			},
			close: func(p *pgParty) { p.conn.Release() },
		},
		{
			name: fmt.Sprintf("lease row, polled every %v", e.poll),
			open: func(ctx context.Context, p *pgParty) error {
				p.owner = fmt.Sprintf("%p", p)
				return nil
			},
			try: func(ctx context.Context, p *pgParty, key string) (func(), bool, error) {
				return e.leaseTry(ctx, p, key)
			},
			lock: func(ctx context.Context, p *pgParty, key string) (func(), error) {
				for {
					release, ok, err := e.leaseTry(ctx, p, key)
					if err != nil || ok {
						return release, err
					}
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(e.poll):
					}
				}
			},
			close: func(*pgParty) {},
		},
		{
			name: "dlock postgreslock",
			open: func(ctx context.Context, p *pgParty) (err error) {
				p.locker, err = postgreslock.New(e.pool, dlock.WithTTL(e.ttl))
				return err
			},
			try: func(ctx context.Context, p *pgParty, key string) (func(), bool, error) {
				lk, err := p.locker.TryLock(ctx, key)
				if errors.Is(err, dlock.ErrNotAcquired) {
					return nil, false, nil
				}
				if err != nil {
					return nil, false, err
				}
				return func() { lk.Unlock(ctx) }, true, nil
			},
			lock: func(ctx context.Context, p *pgParty, key string) (func(), error) {
				lk, err := p.locker.Lock(ctx, key)
				if err != nil {
					return nil, err
				}
				return func() { lk.Unlock(ctx) }, nil
			},
			ready: func(ctx context.Context, p *pgParty) (func(), error) { return listening(ctx, p.locker) },
			close: func(p *pgParty) { p.locker.Close() },
		},
		{
			name: "cirello.io/pglock",
			open: func(ctx context.Context, p *pgParty) (err error) {
				// New accepts lib/pq only; UnsafeNew takes pgx's driver.
				p.pgl, err = pglock.UnsafeNew(e.db, pglock.WithLeaseDuration(e.ttl), pglock.WithHeartbeatFrequency(e.ttl/3))
				return err
			},
			try: func(ctx context.Context, p *pgParty, key string) (func(), bool, error) {
				l, err := p.pgl.AcquireContext(ctx, key, pglock.FailIfLocked())
				if errors.Is(err, pglock.ErrNotAcquired) {
					return nil, false, nil
				}
				if err != nil {
					return nil, false, err
				}
				return func() { p.pgl.ReleaseContext(ctx, l) }, true, nil
			},
			lock: func(ctx context.Context, p *pgParty, key string) (func(), error) {
				l, err := p.pgl.AcquireContext(ctx, key)
				if err != nil {
					return nil, err
				}
				return func() { p.pgl.ReleaseContext(ctx, l) }, nil
			},
			close: func(*pgParty) {},
		},
	}
}

// leaseTry takes key's lease row when it is free or expired, by the
// server's clock, in one upsert; the release deletes it by owner.
func (e *pgEnv) leaseTry(ctx context.Context, p *pgParty, key string) (func(), bool, error) {
	tag, err := e.pool.Exec(ctx, `INSERT INTO bench_leader AS l (name, owner, expires_at)
VALUES ($1, $2, now() + $3 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE l.expires_at < now()`, key, p.owner, e.ttl.Milliseconds())
	if err != nil || tag.RowsAffected() == 0 {
		return nil, false, err
	}
	return func() { e.pool.Exec(ctx, `DELETE FROM bench_leader WHERE name = $1 AND owner = $2`, key, p.owner) }, true, nil
}

// listening starts l's LISTEN session, which a Locker starts at its
// first wait and keeps, and waits until it is up (or 30s): a hand-off
// cell of a few seconds would count a connection per contender, and the
// server's cost of starting hundreds of them, as if each hand-off paid it.
// A watch keeps it listening (a Locker with no waiter and no watch stops
// after a few seconds) until the returned function ends the watch, and
// waits for the watch to have left, just before the cell's clock starts.
func listening(ctx context.Context, l *postgreslock.Locker) (func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	// A watch's first value comes once it is registered and the session
	// is up (or after a few seconds without).
	c, err := l.Watch(wctx, "bench:listening")
	if err != nil {
		cancel()
		return nil, err
	}
	settle := func() {
		cancel()
		for range c { // closed once the watch has left
		}
	}
	select {
	case <-c:
		return settle, nil
	case <-time.After(30 * time.Second):
		settle()
		return nil, fmt.Errorf("the LISTEN session of a contender: not up within 30s")
	case <-ctx.Done():
		settle()
		return nil, ctx.Err()
	}
}

// readyAll readies the parties of s, a few at a time.
func readyAll(ctx context.Context, s pgSystem, parties []*pgParty) error {
	if s.ready == nil {
		return nil
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
		errs = make([]error, len(parties))
	)
	for i, p := range parties {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.settle, errs[i] = s.ready(ctx, p)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pgCycles runs g goroutines, each on a key of its own, taking and
// releasing it for e.cycleD; it returns cycles per second.
func (e *pgEnv) pgCycles(ctx context.Context, s pgSystem, g int, tag string) (float64, error) {
	parties := make([]*pgParty, g)
	for i := range parties {
		parties[i] = &pgParty{}
		if err := s.open(ctx, parties[i]); err != nil {
			return 0, err
		}
		defer s.close(parties[i])
	}
	var n atomic.Int64
	var firstErr atomic.Pointer[error]
	end := time.Now().Add(e.cycleD)
	start := time.Now()
	var wg sync.WaitGroup
	var stuck atomic.Int64 // keys a peer left held after its release
	for i, p := range parties {
		key := fmt.Sprintf("cycle:%s:%d", tag, i)
		wg.Go(func() {
			for time.Now().Before(end) {
				release, ok, err := s.try(ctx, p, key)
				switch {
				case err == nil && !ok && !strings.HasPrefix(s.name, "dlock"):
					// A peer's release that did not free the key (pglock's,
					// racing its heartbeat): go on with a fresh key.
					key = fmt.Sprintf("cycle:%s:%d:%d", tag, i, stuck.Add(1))
					continue
				case err == nil && !ok:
					err = fmt.Errorf("%s: %s was busy", s.name, key)
					fallthrough
				case err != nil:
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				release()
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return 0, *err
	}
	if k := stuck.Load(); k > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d keys stayed held after their release, in %d cycles\n", s.name, k, n.Load())
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// pgHotCell is one hand-off cell: the hand-offs' latencies (from the
// start of a release to the next holder's return from its lock call,
// sorted), the acquisitions, the statements sent, and the CPU this process
// and (when pgEnv.pid is set) the server spent meanwhile.
type pgHotCell struct {
	gaps           []time.Duration
	acquired       int
	stmts          int64
	bySQL          map[string]int64 // the statements, by the start of their text
	client, server time.Duration
}

// stmtsPer is the statements per acquisition.
func (h pgHotCell) stmtsPer() float64 { return float64(h.stmts) / float64(max(h.acquired, 1)) }

// pgHot has c contenders loop on one key for e.hotD: wait for it, hold it
// e.hold, release it, and wait until another contender took it.
func (e *pgEnv) pgHot(ctx context.Context, s pgSystem, c int, key string) (pgHotCell, error) {
	parties := make([]*pgParty, c)
	for i := range parties {
		parties[i] = &pgParty{}
		if err := s.open(ctx, parties[i]); err != nil {
			return pgHotCell{}, err
		}
		defer s.close(parties[i])
	}
	if err := readyAll(ctx, s, parties); err != nil {
		return pgHotCell{}, err
	}
	for _, p := range parties {
		if p.settle != nil {
			p.settle()
		}
	}
	cctx, cancel := context.WithTimeout(ctx, e.hotD)
	defer cancel()
	var (
		mu       sync.Mutex
		gaps     []time.Duration
		lastRel  time.Time
		lastBy   = -1 // who released last
		holder   = -1 // who took it last
		acquired int
	)
	sent0, by0, c0 := e.sent.n.Load(), e.sent.counts(), processCPU()
	var s0 time.Duration
	if e.pid > 0 {
		s0 = serverCPU(e.pid)
	}
	var wg sync.WaitGroup
	for i, p := range parties {
		wg.Go(func() {
			for cctx.Err() == nil {
				release, err := s.lock(cctx, p, key)
				if err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				acquired++
				holder = i
				if lastBy >= 0 && lastBy != i {
					gaps = append(gaps, now.Sub(lastRel))
				}
				mu.Unlock()
				time.Sleep(e.hold)
				mu.Lock()
				lastRel, lastBy = time.Now(), i
				mu.Unlock()
				release()
				// Let another contender take it (1s at most) before
				// trying again.
				for wait := time.Now().Add(time.Second); cctx.Err() == nil && time.Now().Before(wait); {
					mu.Lock()
					taken := holder != i
					mu.Unlock()
					if taken {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	h := pgHotCell{acquired: acquired, stmts: e.sent.n.Load() - sent0, client: processCPU() - c0, bySQL: map[string]int64{}}
	for k, v := range e.sent.counts() {
		if d := v - by0[k]; d > 0 {
			h.bySQL[k] = d
		}
	}
	if e.pid > 0 {
		h.server = serverCPU(e.pid) - s0
	}
	slices.Sort(gaps)
	h.gaps = gaps
	return h, nil
}

// warm opens n connections in the pool and in db (when set), so that no
// cell pays for starting server processes.
func (e *pgEnv) warm(ctx context.Context, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	sconns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
		for _, c := range sconns {
			c.Close()
		}
	}()
	for range n {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if e.db == nil {
			continue
		}
		sc, err := e.db.Conn(ctx)
		if err != nil {
			return err
		}
		if err := sc.PingContext(ctx); err != nil {
			return err
		}
		sconns = append(sconns, sc)
	}
	return nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(float64(len(d)-1)*q)]
}

// runPostgres measures the PostgreSQL part and writes its section into
// file.
func runPostgres(ctx context.Context, cfg config, file string) error {
	srv, err := pgtest.Start(pgtest.Options{Fsync: true, Settings: []string{"max_connections=400"}})
	if err != nil {
		return err
	}
	defer srv.Close()
	e := &pgEnv{url: srv.URL(""), poll: 5 * time.Millisecond, ttl: 10 * time.Second, hold: 2 * time.Millisecond,
		cycleD: cfg.duration, hotD: 3 * cfg.hotDuration, log: cfg.log}
	pc, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		return err
	}
	pc.ConnConfig.Tracer = &e.sent
	pc.MaxConns = 150
	if e.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return err
	}
	defer e.pool.Close()
	dc := pc.ConnConfig.Copy()
	e.db = stdlib.OpenDB(*dc)
	e.db.SetMaxOpenConns(150)
	e.db.SetMaxIdleConns(150)
	defer e.db.Close()
	if err := e.warm(ctx, 140); err != nil {
		return err
	}
	setup, err := postgreslock.New(e.pool)
	if err != nil {
		return err
	}
	if err := setup.CreateTable(ctx); err != nil {
		return err
	}
	setup.Close()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_leader (name text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL)`); err != nil {
		return err
	}
	pgl, err := pglock.UnsafeNew(e.db)
	if err != nil {
		return err
	}
	if err := pgl.TryCreateTable(); err != nil {
		return err
	}
	var version string
	e.pool.QueryRow(ctx, `SHOW server_version`).Scan(&version)

	systems := e.systems()
	goroutines := []int{1, 8, 64}
	contenders := []int{8, 32}
	repeats := cfg.repeats
	cycles := make([][][]float64, len(systems)) // system, goroutines, repeat
	for i := range cycles {
		cycles[i] = make([][]float64, len(goroutines))
	}
	fmt.Fprintf(cfg.log, "postgres: uncontended, %d repeats\n", repeats)
	// First one cell of each system at the most goroutines, not measured:
	// every connection the cells use has then prepared each system's
	// statements, and the server planned them, as in a process that has
	// run a while. Else the first cell of each system pays for it, a
	// system with longer statements more.
	for si, s := range systems {
		if _, err := e.pgCycles(ctx, s, slices.Max(goroutines), fmt.Sprintf("warm.%d", si)); err != nil {
			return err
		}
	}
	for r := range repeats {
		for k := range systems {
			si := (k + r) % len(systems)
			for gi, g := range goroutines {
				v, err := e.pgCycles(ctx, systems[si], g, fmt.Sprintf("%d.%d", r, si))
				if err != nil {
					return err
				}
				cycles[si][gi] = append(cycles[si][gi], v)
			}
		}
	}
	type hot struct {
		p50, p99 time.Duration
		stmts    float64
		acq      int
	}
	hots := make([][]hot, len(systems))
	fmt.Fprintln(cfg.log, "postgres: hand-offs")
	for si, s := range systems {
		for _, c := range contenders {
			h, err := e.pgHot(ctx, s, c, fmt.Sprintf("hot:%d:%d", si, c))
			if err != nil {
				return err
			}
			hots[si] = append(hots[si], hot{quantile(h.gaps, .5), quantile(h.gaps, .99), h.stmtsPer(), h.acquired})
		}
	}

	fmt.Fprintln(cfg.log, "postgres: 1,000 held locks")
	const heldN, heldTTL, heldWindow = 1000, 3 * time.Second, 10 * time.Second
	held, err := e.pgHeldLocks(ctx, srv.Pid(), heldN, heldTTL, heldWindow)
	if err != nil {
		return err
	}

	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "## PostgreSQL\n\n")
	fmt.Fprintf(&b, "Written by `cd bench && go run . -postgres RESULTS.md` on %s; the other sections are not from this run.\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "One PostgreSQL %s server started by `postgreslock/pgtest` on loopback, fsync on (synchronous_commit on; dlock's releases that hand the lock to nobody and its waiter registrations turn it off for their own transaction; its acquisitions, renewals and releases that hand the lock to a waiter wait for the flush), %d cores (GOMAXPROCS %d), load average %s at the end. ",
		version, runtime.NumCPU(), runtime.GOMAXPROCS(0), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "cirello.io/pglock v1.16.0 runs over pgx's database/sql driver (its `New` takes lib/pq only, so `UnsafeNew`), lease %v, heartbeat every %v; every lease here is %v.\n\n", e.ttl, e.ttl/3, e.ttl)
	fmt.Fprintf(&b, "- **Uncontended**: each goroutine takes and releases a key of its own for %v (try, then release), %d repeats interleaved with the other systems, after one unmeasured cell of each at %d goroutines (which prepares its statements on the connections the cells use); the median, and the min–max in brackets. The advisory lock keeps one pooled session per goroutine.\n", e.cycleD, repeats, slices.Max(goroutines))
	fmt.Fprintf(&b, "- **Hand-off**: contenders each a party of its own (a Locker, a pglock client, a session) wait for one key, hold it %v, release it, and let another take it; latency from the start of a release to the next holder's return, over %v per cell (each Locker's LISTEN session, which a process sets up once, is up before the cell's clock). Statements per acquisition are all the statements the parties sent (attempts, registrations, releases, polls, heartbeats), counted by a pgx tracer.\n\n", e.hold, e.hotD)
	b.WriteString("| system | cycles/s at 1 | at 8 | at 64 | hand-off p50 / p99 at 8 | at 32 | statements per acquisition at 8 / 32 | acquisitions at 8 / 32 |\n|---|---|---|---|---|---|---|---|\n")
	for si, s := range systems {
		fmt.Fprintf(&b, "| %s |", s.name)
		for gi := range goroutines {
			v := cycles[si][gi]
			fmt.Fprintf(&b, " %.0f (%.0f–%.0f) |", middle(v), slices.Min(v), slices.Max(v))
		}
		for _, h := range hots[si] {
			fmt.Fprintf(&b, " %s / %s |", pgMS(h.p50), pgMS(h.p99))
		}
		fmt.Fprintf(&b, " %.1f / %.1f | %d / %d |\n", hots[si][0].stmts, hots[si][1].stmts, hots[si][0].acq, hots[si][1].acq)
	}
	fmt.Fprintf(&b, "\n- **Held locks**: %d locks held with a %v lease, each renewed every %v, over %v: this process's CPU (getrusage) and the server's (the postmaster and its processes, from /proc), as a share of one core, and the statements sent per second; the first row is the same window with nothing held, which the others include. Goal: at most 1%% of a core each side beyond that.\n\n", heldN, heldTTL, heldTTL/3, heldWindow)
	b.WriteString("| keeping 1,000 locks | client CPU | server CPU | statements/s |\n|---|---|---|---|\n")
	for _, h := range held {
		fmt.Fprintf(&b, "| %s | %.1f %% | %.1f %% | %.1f |\n", h.name, h.client, h.server, h.stmtsPerS)
	}
	var us []pgSummary
	for si, s := range systems {
		u := pgSummary{name: s.name}
		for gi := range goroutines {
			u.cycles = append(u.cycles, middle(cycles[si][gi]))
		}
		for _, h := range hots[si] {
			u.p50, u.stmts = append(u.p50, h.p50), append(u.stmts, h.stmts)
		}
		us = append(us, u)
	}
	if gs := pgGoals(us, goroutines, contenders, held); len(gs) > 0 {
		b.WriteString("\n**Goals** (dlock postgreslock, from the medians above):\n\n")
		goalRows(func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }, gs)
	}
	return replaceSection(file, "## PostgreSQL", b.String())
}

func pgMS(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

// replaceSection replaces the section of file that starts with heading
// (up to the next "## " heading) with text, or appends text.
func replaceSection(file, heading, text string) error {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s := string(old)
	if i := strings.Index(s, heading+"\n"); i >= 0 {
		j := strings.Index(s[i+len(heading):], "\n## ")
		rest := ""
		if j >= 0 {
			rest = s[i+len(heading)+j+1:]
		}
		s = s[:i] + text + "\n" + rest
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + text
	}
	return os.WriteFile(file, []byte(s), 0o644)
}
