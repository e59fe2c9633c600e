package pgtest_test

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5"
)

// A server starts, answers, survives kill -9 with its data, and stops.
func TestServer(t *testing.T) {
	s, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		c, err := pgx.Connect(ctx, s.URL(""))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, s.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after kill -9 and restart: %d, %v; want 42", x, err)
	}
}
