package postgreslock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// shared is the server of the tests that need no faults, started once by
// TestMain; its database "postgres" has the default tables.
var shared *pgtest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// Benchmarks run with fsync on, as a production server: what a
	// commit waits for is most of an acquisition's cost.
	flag.Parse()
	benchmarks := flag.Lookup("test.bench").Value.String() != ""
	var err error
	shared, err = pgtest.Start(pgtest.Options{Fsync: benchmarks})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer shared.Close()
	if err := createTables(shared); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("DLOCK_POSTGRES_URL", shared.URL("")) // for the Examples, which read it as a program would
	code := m.Run()
	if code == 0 {
		if err := checkLeaks(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

// createTables creates the default tables on s, within 30s.
func createTables(s *pgtest.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.CreateTables(ctx)
}

// checkLeaks waits up to d for every goroutine running code of this
// package to end, and reports those still there.
func checkLeaks(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "dlock/postgreslock.") && !strings.Contains(g, "postgreslock_test.checkLeaks") && !strings.Contains(g, "postgreslock_test.TestMain") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgreslock: %d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pool returns a pool on url ("" for the shared server), closed when t
// ends.
func pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	if url == "" {
		url = shared.URL("")
	}
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newLocker returns a Locker over p, closed when t ends.
func newLocker(t testing.TB, p *pgxpool.Pool, opts ...dlock.Option) *postgreslock.Locker {
	t.Helper()
	l, err := postgreslock.New(p, opts...)
	if err != nil {
		t.Fatalf("postgreslock.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
