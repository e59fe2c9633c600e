package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresBackend is a connection pool to PostgreSQL and the Locker over
// it.
type postgresBackend struct {
	*postgreslock.Locker
	pool *pgxpool.Pool
}

func (b *postgresBackend) name() string { return usePostgres }

func (b *postgresBackend) close() {
	b.Locker.Close()
	b.pool.Close()
}

// parsePostgresURL reads --postgres: a postgres:// or postgresql:// URL,
// or a libpq key=value string. The connection timeout is the URL's
// connect_timeout, else the default dial timeout. Errors never contain
// the password.
func parsePostgresURL(raw string) (*pgxpool.Config, time.Duration, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, 0, errors.New("bad PostgreSQL URL: empty; want postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok && scheme != "postgres" && scheme != "postgresql" {
		return nil, 0, fmt.Errorf("bad PostgreSQL URL %s: unknown scheme %q; want postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE", redactURL(raw), scheme)
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			err = pe.Unwrap()
		}
		return nil, 0, fmt.Errorf("bad PostgreSQL URL %s: %s", redactURL(raw), redactErr(err, raw))
	}
	dial := cfg.ConnConfig.ConnectTimeout
	if dial <= 0 {
		dial = defaultDialTimeout
		cfg.ConnConfig.ConnectTimeout = dial
	}
	cfg.MaxConns = 4 // one command's locks, renewals and views
	return cfg, dial, nil
}

// openPostgres opens the PostgreSQL backend, and returns it with the
// check that the server answers within the dial timeout and has the lock
// tables, which it creates when they are missing.
func (b *backendFlags) openPostgres(e *env, name string, opts ...dlock.Option) (backend, func() int, int) {
	raw := b.postgres
	if raw == "" {
		raw = e.getenv("DLOCK_POSTGRES_URL")
	}
	cfg, dial, err := parsePostgresURL(raw)
	if err != nil {
		return nil, nil, usageError(e, name, "%v", err)
	}
	where := postgresWhere(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, nil, usageError(e, name, "%v", err)
	}
	locker, err := postgreslock.New(pool, append([]dlock.Option{dlock.WithPrefix(b.prefix)}, opts...)...)
	if err != nil {
		pool.Close()
		return nil, nil, usageError(e, name, "%v", trimDlock(err))
	}
	ping := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), dial)
		defer cancel()
		var exists bool
		err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, locker.Table()+"_holds").Scan(&exists)
		if err == nil && !exists {
			err = locker.CreateTable(ctx)
			if err != nil && postgresRefusal(err) != noAnswer {
				fmt.Fprintf(e.stderr, "dlock: the lock tables are missing in PostgreSQL at %s and could not be created: %s (create them with the DDL of postgreslock.Schema)\n", where, postgresMessage(err))
				return exitConfig
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("no answer within %v", dial)
			}
			return refused(e, usePostgres, where, postgresRefusal(err), errors.New(postgresMessage(err)))
		}
		return 0
	}
	return &postgresBackend{Locker: locker, pool: pool}, ping, 0
}

// postgresWhere names the server of cfg in messages: HOST:PORT/DATABASE.
func postgresWhere(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	host := c.Host
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s (socket, port %d)/%s", host, c.Port, c.Database)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(c.Port))) + "/" + c.Database
}

// postgresRefusal classifies the error of the first statement by its
// SQLSTATE: class 28 refused the login, 3D000 (no such database) and the
// rest of the server's errors the configuration; a TLS failure is a
// handshake's; anything else is no answer.
func postgresRefusal(err error) refusal {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		if strings.HasPrefix(pg.Code, "28") {
			return badLogin
		}
		return badConfig
	}
	if strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: ") {
		return badTLS
	}
	return noAnswer
}

// postgresMessage is err's message on one line: the server's own message
// when it sent one, else the cause without pgx's wrapping.
func postgresMessage(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Message + " (SQLSTATE " + pg.Code + ")"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
