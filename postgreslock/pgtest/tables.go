package pgtest

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
)

// CreateTables creates postgreslock's tables and functions, with the
// default table name, in the server's database "postgres" (see
// [postgreslock.Schema]).
func (s *Server) CreateTables(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.URL(""))
	if err != nil {
		return fmt.Errorf("pgtest: create tables: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, postgreslock.Schema); err != nil {
		return fmt.Errorf("pgtest: create tables: %w", err)
	}
	return nil
}
