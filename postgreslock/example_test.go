package postgreslock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A holder that paused past its lease cannot commit: the fence check in
// its own transaction finds that the lock was taken over, and the write
// is rolled back. The check locks the hold's row until the transaction
// ends, so nobody can take the lock between the check and the commit.
func ExampleLocker_CheckFence() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_POSTGRES_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	locker, err := postgreslock.New(pool)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	if err := locker.CreateTable(ctx); err != nil {
		panic(err)
	}
	pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS example_ledger (id text PRIMARY KEY, amount int)")

	// write updates the ledger under the lock of "ledger:42", with the
	// fence checked in the same transaction.
	write := func(fence uint64, amount int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := locker.CheckFence(ctx, tx, "ledger:42", fence); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO example_ledger VALUES ('42', $1)
				ON CONFLICT (id) DO UPDATE SET amount = $1`, amount)
			return err
		})
	}

	// The first holder takes a short lease that nobody renews, and pauses
	// (a GC pause, a stopped VM) past it.
	first, err := locker.TryLock(ctx, "ledger:42", dlock.WithLease(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	time.Sleep(300 * time.Millisecond)

	// Meanwhile another process takes the lock, and writes.
	other, err := postgreslock.New(pool)
	if err != nil {
		panic(err)
	}
	defer other.Close()
	second, err := other.TryLock(ctx, "ledger:42")
	if err != nil {
		panic(err)
	}
	fmt.Println("second holder writes:", write(second.Fence(), 200))

	// The first holder wakes up and tries to write with its old fence.
	err = write(first.Fence(), 100)
	fmt.Println("paused holder refused:", errors.Is(err, postgreslock.ErrFenceStale))

	var amount int
	pool.QueryRow(ctx, "SELECT amount FROM example_ledger WHERE id = '42'").Scan(&amount)
	fmt.Println("amount:", amount)
	second.Unlock(ctx)
	// Output:
	// second holder writes: <nil>
	// paused holder refused: true
	// amount: 200
}
