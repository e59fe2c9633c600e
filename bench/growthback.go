package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/dlock-go/dlock/redislock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The backends of part 7, each on servers of its own.

// growRedis: one redislock Locker holding up to cfg.growth.redisMax locks,
// then the contended key.
func growRedis(ctx context.Context, cfg config, dir string, run *growthRun) error {
	srv, err := redistest.New(dir, redistest.Config{})
	if err != nil {
		return err
	}
	defer srv.Close()
	admin := redis.NewClient(clientOptions(srv.Addr()))
	defer admin.Close()
	c := redis.NewClient(clientOptions(srv.Addr()))
	l, err := redislock.New(c, dlock.WithTTL(cfg.growth.ttl))
	if err != nil {
		c.Close()
		return err
	}
	h := holder{name: backRedis, l: l, read: func(ctx context.Context) (gauge, error) { return redisGauge(ctx, admin) }, cmdsUnit: "commands", perLock: true}
	_, err = growHeld(ctx, cfg, h, sizes(cfg.growth.redisMax), run)
	// Up to a million releases would take longer than the rest of the
	// part: the Locker lets go of its locks and the server is emptied.
	l.Orphan()
	c.Close()
	if err != nil {
		return err
	}
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return err
	}
	t := redisTarget(srv.Addr(), admin)
	return growHot(cfg, run, backRedis, func(n int) (hotGrowth, error) {
		c, err := hotKey(ctx, t, dlockSys{}, n, cfg.growth.cell(n), cfg.hold, cfg.ttl)
		return hotRow(backRedis, "round trips", c, false), err
	})
}

// growRedlock: the contended key on five servers.
func growRedlock(ctx context.Context, cfg config, dir string, run *growthRun) error {
	var (
		addrs  []string
		admins []*redis.Client
	)
	for i := range redlockNodes {
		srv, err := redistest.New(filepath.Join(dir, fmt.Sprint(i)), redistest.Config{})
		if err != nil {
			return err
		}
		defer srv.Close()
		addrs = append(addrs, srv.Addr())
		a := redis.NewClient(clientOptions(srv.Addr()))
		defer a.Close()
		admins = append(admins, a)
	}
	first := redisTarget(addrs[0], admins[0])
	all := &target{endpoint: first.endpoint, stats: func(ctx context.Context) (serverStats, error) { return sumStats(ctx, admins) }}
	return growHot(cfg, run, backRedlock, func(n int) (hotGrowth, error) {
		c, err := hotKey(ctx, all, redlockSys{addrs}, n, cfg.growth.cell(n), cfg.hold, cfg.ttl)
		return hotRow(backRedlock, "round trips", c, false), err
	})
}

// growEtcd: one etcdlock Locker holding up to cfg.growth.otherMax locks on
// a one-member embedded cluster, then the contended key.
func growEtcd(ctx context.Context, cfg config, dir string, run *growthRun) error {
	c, err := etcdtest.New(dir, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	admin, err := clientv3.New(etcdtest.ClientConfig(c.Endpoints()...))
	if err != nil {
		return err
	}
	defer admin.Close()
	t := etcdTarget(c, admin)
	var rtt counter
	cli, err := newEtcdClient(t.endpoint(0), &rtt)
	if err != nil {
		return err
	}
	l, err := etcdlock.New(cli, dlock.WithTTL(cfg.growth.ttl))
	if err != nil {
		cli.Close()
		return err
	}
	h := holder{name: backEtcd, l: l, cmdsUnit: "requests",
		read: func(ctx context.Context) (gauge, error) {
			st, err := admin.Status(ctx, c.Endpoints()[0])
			if err != nil {
				return gauge{}, fmt.Errorf("etcd status: %w", err)
			}
			return gauge{cpu: -1, bytes: st.DbSizeInUse, cmds: rtt.n.Load()}, nil
		}}
	locks, err := growHeld(ctx, cfg, h, sizes(cfg.growth.otherMax), run)
	err = errors.Join(err, releaseAll(ctx, locks), l.Close(), cli.Close())
	if err != nil {
		return err
	}
	return growHot(cfg, run, backEtcd, func(n int) (hotGrowth, error) {
		ecfg := cfg
		ecfg.etcdHotDuration = cfg.growth.cell(n)
		c, err := boundedHotKey(ctx, ecfg, t, etcdlockSys{}, n)
		return hotRow(backEtcd, "round trips", c, true), err
	})
}

// growPostgres: one postgreslock Locker holding up to cfg.growth.otherMax
// locks on a server with fsync on, then the contended key (each contender
// has a Locker, and so a LISTEN session, of its own).
func growPostgres(ctx context.Context, cfg config, _ string, run *growthRun) error {
	top := cfg.growth.contenders[len(cfg.growth.contenders)-1]
	// Each contender has its LISTEN session, and the pool as many
	// connections as contenders, as if each were a process of its own.
	srv, err := pgtest.Start(pgtest.Options{Fsync: true, Settings: []string{fmt.Sprintf("max_connections=%d", 2*top+50)}})
	if err != nil {
		return err
	}
	defer srv.Close()
	e := &pgEnv{url: srv.URL(""), pid: srv.Pid(), ttl: cfg.ttl, hold: cfg.hold}
	pc, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		return err
	}
	pc.ConnConfig.Tracer = &e.sent
	pc.MaxConns = int32(max(top, 64))
	if e.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return err
	}
	defer e.pool.Close()
	// As many connections as contenders, opened before any cell: each
	// stands for a process's own.
	if err := e.warm(ctx, top); err != nil {
		return err
	}
	l, err := postgreslock.New(e.pool, dlock.WithTTL(cfg.growth.ttl))
	if err != nil {
		return err
	}
	if err := l.CreateTable(ctx); err != nil {
		l.Close()
		return err
	}
	h := holder{name: backPostgres, l: l, cmdsUnit: "statements",
		read: func(ctx context.Context) (gauge, error) {
			var size int64
			// Through the pool: one statement more per reading, next to
			// thousands.
			if err := e.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size); err != nil {
				return gauge{}, fmt.Errorf("database size: %w", err)
			}
			return gauge{cpu: serverCPU(e.pid), bytes: size, cmds: e.sent.n.Load()}, nil
		}}
	locks, err := growHeld(ctx, cfg, h, sizes(cfg.growth.otherMax), run)
	if err = errors.Join(err, releaseAll(ctx, locks), l.Close()); err != nil {
		return err
	}
	var sys pgSystem
	for _, s := range e.systems() {
		if s.name == backPostgres {
			sys = s
		}
	}
	if sys.name == "" {
		return fmt.Errorf("no system %q among the PostgreSQL systems", backPostgres)
	}
	return growHot(cfg, run, backPostgres, func(n int) (hotGrowth, error) {
		e.hotD = cfg.growth.cell(n)
		return pgHotRow(ctx, e, sys, n)
	})
}
