package dlocktest

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Harness is what a driver gives the suite.
type Harness struct {
	// New returns a fresh Locker on the backend under test, built with
	// the default prefix and options plus opts. Lockers from one Harness
	// contend with each other, as processes would; the suite closes every
	// Locker it asks for. Required.
	New func(t *testing.T, opts ...dlock.Option) dlock.Locker

	// Lose makes the server forget every hold of key, as if the lease ran
	// out or an operator deleted it (Redis: DEL "<prefix>:lock:<key>";
	// etcd: delete the key's range). Nil skips the subtests that need it.
	Lose func(t *testing.T, key string)

	// MinTTL is the shortest lease the backend accepts (etcd: one second).
	// The suite uses it for the leases it lets run out, and checks that a
	// shorter TTL is refused. Zero means dlock.MinTTL.
	MinTTL time.Duration

	// LeaseTTL is the lease of the holds the suite lets run out. Zero
	// means MinTTL, or 100ms if that is shorter. A driver whose timeouts
	// scale with the lease (Redlock gives a node half the TTL to answer)
	// passes a longer one, so that a loaded machine does not fail it.
	LeaseTTL time.Duration

	// Caps lists the optional behaviours of the driver's locks. The
	// subtests of the others are skipped with a message naming the
	// capability. What the driver offers beyond the lock (semaphores,
	// read-write locks, watches, UnlockAfter) it declares itself, through
	// driver.Supports.
	Caps Capabilities

	// Backend names the backend in the table of what works where, for
	// example "Redis, one server". Empty means the name of the test.
	Backend string
	// Matrix, when set, counts the cells of the matrix for the table of
	// what works where (see Matrix.Check).
	Matrix *Matrix
}

func (h Harness) backend(t *testing.T) string {
	if h.Backend != "" {
		return h.Backend
	}
	return t.Name()
}

// Capabilities is a set of optional behaviours of a driver.
type Capabilities uint

// The optional behaviours.
const (
	// Reentrancy: holds for one owner id (dlock.WithOwner) succeed while
	// the owner holds the key, from any Locker, and are counted exactly.
	Reentrancy Capabilities = 1 << iota
	// Fencing: Lock.Fence grows strictly with every acquisition of a key
	// (a driver that fences on request only, as Redis does, claims it for
	// Lockers made with dlock.WithFencing(true)).
	Fencing
	// RetryAfter: a busy TryLock says how long the holder's lease has left.
	RetryAfter
	// LostSignal: Done closes, with Err matching ErrLockLost, when a held
	// lock runs out or the server forgets it.
	LostSignal

	// All is every capability above.
	All = Reentrancy | Fencing | RetryAfter | LostSignal
)

var capNames = []string{"Reentrancy", "Fencing", "RetryAfter", "LostSignal"}

// Has reports whether c includes every capability of x.
func (c Capabilities) Has(x Capabilities) bool { return c&x == x }

// String lists the capabilities in c, joined by "|".
func (c Capabilities) String() string {
	var s []string
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

func (h Harness) minTTL() time.Duration {
	if h.MinTTL > 0 {
		return h.MinTTL
	}
	return dlock.MinTTL
}

// leaseTTL is the lease of the locks that the suite lets run out.
func (h Harness) leaseTTL() time.Duration {
	if h.LeaseTTL > 0 {
		return h.LeaseTTL
	}
	return max(h.minTTL(), 100*time.Millisecond)
}

// bound is how long the suite waits for something that must happen.
func (h Harness) bound() time.Duration { return 10*time.Second + 3*h.leaseTTL() }

func (h Harness) need(t *testing.T, c Capabilities) {
	t.Helper()
	if !h.Caps.Has(c) {
		t.Skipf("dlocktest: the driver does not declare capability %v", c)
	}
}

func (h Harness) needLose(t *testing.T) {
	t.Helper()
	h.need(t, LostSignal)
	if h.Lose == nil {
		t.Skip("dlocktest: the harness has no Lose hook")
	}
}
