package redlock

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
)

// The Redlock driver keeps the contract that every dlock driver keeps, on
// 3 and on 5 independent masters, with every capability of a lock (its
// fences grow across the nodes whatever the options say) and the
// read-write lock. It offers no semaphore (see the package doc).
func TestConformance(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(map[int]string{3: "3nodes", 5: "5nodes"}[n], func(t *testing.T) {
			dlocktest.Run(t, harness(shared[:n]))
		})
	}
}

func harness(servers []*redistest.Server) dlocktest.Harness {
	return dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := NewConfig(Config{Clients: clients(t, servers), NodeTimeout: testTimeout}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) { lose(t, servers, key) },
		Caps: dlocktest.All | dlocktest.RWLock,
	}
}
