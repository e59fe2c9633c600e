package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// node is one of the independent masters.
type node struct {
	i      int
	client redis.UniversalClient
	send   redisnode.Processor // the client, or a coalescer in front of it
	addr   string
}

// sender returns what a Locker sends a node's commands through: a
// coalescer in front of a client of one server, so that the requests its
// goroutines make of the node at the same time share round trips.
func sender(c redis.UniversalClient) redisnode.Processor {
	if rc, ok := c.(*redis.Client); ok {
		return redisnode.NewCoalescer(rc)
	}
	return c
}

// reply is one node's answer to one request of a round.
type reply struct {
	node int
	n    int64  // an integer reply
	s    string // a string reply
	err  error
	// skipped: the request was not waited for (see Locker.release)
	skipped bool
}

// definite reports whether the node answered: a reply, or an error reply
// of the server, as opposed to no reply (a timeout, a broken connection),
// after which the request may or may not have run.
func (r reply) definite() bool {
	return r.err == nil || errors.As(r.err, new(redis.Error))
}

// A round sends one request to each of some nodes at once, each bounded
// by the per-node timeout, and collects the replies until the caller has
// enough to decide. Replies that come after the caller stopped listening
// are late: settle hands them to the round's cleanup when the caller's
// decision was to give up (an attempt that failed must give back what a
// late node granted).
type round struct {
	mu         sync.Mutex
	collecting bool
	ch         chan reply
	settled    bool
	failed     bool
	pending    []reply
	cleanup    func(reply) // may be nil
	cancel     context.CancelFunc
	answers    []answer        // by node; under mu
	bg         *sync.WaitGroup // the Locker's, which Close waits for
}

// answer is how one node's request of a round ended.
type answer struct {
	asked    bool          // the round sent the node a request
	done     bool          // the node answered or timed out
	definite bool          // the node answered (see reply.definite)
	wake     chan struct{} // made by await, closed when done
}

// await waits until node answered its request of the round, or timed out,
// for at most d, and reports whether it answered (see reply.definite): a
// request that got no answer may or may not have run.
func (r *round) await(node int, d time.Duration) (definite bool) {
	r.mu.Lock()
	a := &r.answers[node]
	if !a.asked || a.done {
		r.mu.Unlock()
		return a.definite
	}
	if a.wake == nil {
		a.wake = make(chan struct{})
	}
	wake := a.wake
	r.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		r.mu.Lock()
		defer r.mu.Unlock()
		return a.definite
	case <-t.C:
		return false
	}
}

// fanout runs send on every node of nodes in parallel, with a context
// that carries ctx's values, not its cancellation, and ends after timeout.
// It returns the replies received until enough says so, every node
// answered, the timeout passed or ctx ended; the caller then calls settle.
func (l *Locker) fanout(ctx context.Context, nodes []*node, timeout time.Duration, send func(context.Context, *node) reply, enough func([]reply) bool, cleanup func(reply)) ([]reply, *round) {
	if l.testHook != nil {
		l.testHook()
	}
	r := &round{collecting: true, ch: make(chan reply, len(nodes)), cleanup: cleanup, answers: make([]answer, len(l.nodes)), bg: &l.bg}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	r.cancel = cancel
	if len(nodes) == 0 {
		cancel()
	}
	var left atomic.Int32 // the context ends when every node answered
	left.Store(int32(len(nodes)))
	for _, n := range nodes {
		r.answers[n.i].asked = true
	}
	for _, n := range nodes {
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			rep := send(nctx, n)
			rep.node = n.i
			r.deliver(rep)
			if left.Add(-1) == 0 {
				r.cancel()
			}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	got := make([]reply, 0, len(nodes))
collect:
	for len(got) < len(nodes) {
		select {
		case rep := <-r.ch:
			got = append(got, rep)
			if enough != nil && enough(got) {
				break collect
			}
		case <-timer.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	r.mu.Lock()
	r.collecting = false
	for {
		select {
		case rep := <-r.ch:
			r.pending = append(r.pending, rep)
			continue
		default:
		}
		break
	}
	r.mu.Unlock()
	return got, r
}

func (r *round) deliver(rep reply) {
	r.mu.Lock()
	a := &r.answers[rep.node]
	a.done, a.definite = true, rep.definite()
	if a.wake != nil {
		close(a.wake)
	}
	switch {
	case r.collecting:
		r.ch <- rep // cannot block: one slot per node
		r.mu.Unlock()
	case !r.settled:
		r.pending = append(r.pending, rep)
		r.mu.Unlock()
	default:
		failed := r.failed
		r.mu.Unlock()
		if failed && r.cleanup != nil {
			r.cleanup(rep)
		}
	}
}

// settle records the caller's decision: failed means that late replies
// are cleaned up. The replies that came after collection ended and before
// settle are cleaned up now.
func (r *round) settle(failed bool) {
	r.mu.Lock()
	r.settled, r.failed = true, failed
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	if failed && r.cleanup != nil {
		for _, rep := range pending {
			r.bg.Add(1)
			go func() { // a cleanup may wait for a node that does not answer
				defer r.bg.Done()
				r.cleanup(rep)
			}()
		}
	}
}
