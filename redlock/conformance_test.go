package redlock

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
)

// The Redlock driver keeps the contract that every dlock driver keeps, on
// 3 and on 5 independent masters, with every capability of a lock (its
// fences grow across the nodes whatever the options say), read-write
// locks, watches and lapses; it declares that it offers no semaphore (see
// the package doc). The README's table of what works where is checked
// against what ran.
func TestConformance(t *testing.T) {
	var m dlocktest.Matrix
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("redlock-%d", n), func(t *testing.T) {
			h := harness(shared[:n])
			h.Backend, h.Matrix = fmt.Sprintf("Redlock, %d masters", n), &m
			dlocktest.Run(t, h)
		})
	}
	m.Check(t, filepath.Join("..", "README.md"))
}

// conformanceTimeout is the node timeout of the suite's Lockers: under
// make test's load, with the race detector, a node's reply took more than
// 500ms often enough to fail a cell in every few runs (no quorum, where
// the cell wants a lock). The lease's half bounds it for the short leases.
const conformanceTimeout = 2 * time.Second

func harness(servers []*redistest.Server) dlocktest.Harness {
	return dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := New(clients(t, servers), append([]dlock.Option{WithNodeTimeout(conformanceTimeout)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) { lose(t, servers, key) },
		Caps: dlocktest.All,
		// A node has half the lease to answer: a second's lease gives it
		// the 500ms a loaded machine may take.
		LeaseTTL: time.Second,
	}
}
