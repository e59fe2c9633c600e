package redlock

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// With 5 nodes, 2 killed: the lock is still acquired, renewed, released.
func TestTwoOfFiveKilled(t *testing.T) {
	s := start(t, 5)
	l := newLocker(t, s)
	ctx := context.Background()
	s[0].Kill()
	s[3].Kill()
	k := keyFor(t)
	// A renewal is due a third of the way into the lease and must reach
	// the majority before its end: 300ms left 200ms, which a loaded
	// machine's scheduling (make test, the race detector) overran once.
	const ttl = time.Second
	lk, err := l.TryLock(ctx, k, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryLock with 3 of 5 nodes up: %v", err)
	}
	// Held across four leases: the watchdog renewed it on the majority.
	select {
	case <-lk.Done():
		t.Fatalf("lost with 3 of 5 nodes up: %v", lk.Err())
	case <-time.After(4 * ttl):
	}
	if d, err := lk.TTL(ctx); err != nil || d <= ttl/2 {
		t.Errorf("TTL after four leases = %v, %v; want over %v", d, err, ttl/2)
	}
	if _, err := newLocker(t, s).TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("another Locker's TryLock: %v, want ErrNotAcquired", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lk2, err := newLocker(t, s).Lock(ctx, k, dlock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if lk2.Fence() <= lk.Fence() {
		t.Errorf("fence %d after %d", lk2.Fence(), lk.Fence())
	}
	lk2.Unlock(ctx)
}

// With 5 nodes, 3 killed: no majority, told apart from a busy lock, and
// within the per-node timeout.
func TestThreeOfFiveKilled(t *testing.T) {
	s := start(t, 5)
	l := newLocker(t, s)
	ctx := context.Background()
	for _, i := range []int{1, 2, 4} {
		s[i].Kill()
	}
	k := keyFor(t)
	begin := time.Now()
	_, err := l.TryLock(ctx, k)
	took := time.Since(begin)
	if !errors.Is(err, ErrNoQuorum) || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 2 of 5 nodes up: %v, want ErrNoQuorum and not ErrNotAcquired", err)
	}
	if took > testTimeout+time.Second {
		t.Errorf("TryLock took %v, want within the per-node timeout %v (and scheduling slack)", took, testTimeout)
	}
	// A waiting Lock reports the same when its wait ends.
	_, err = l.Lock(ctx, k, dlock.WithWait(300*time.Millisecond))
	if !errors.Is(err, ErrNoQuorum) {
		t.Errorf("Lock with 2 of 5 nodes up: %v, want ErrNoQuorum", err)
	}
	// Nothing was left behind on the two that answered.
	s[1].Restart()
	lk, err := newLocker(t, s).TryLock(ctx, k)
	if err != nil {
		t.Fatalf("TryLock with 3 of 5 up again: %v", err)
	}
	lk.Unlock(ctx)
}

// A node stopped (SIGSTOP) while an acquisition is under way does not
// delay it past the per-node timeout; with a majority awake it does not
// delay it at all.
func TestPausedNodeDoesNotDelayAcquire(t *testing.T) {
	s := start(t, 5)
	// A per-node timeout far above what a loaded machine takes to answer,
	// so that waiting for the paused node and not waiting for it are told
	// apart whatever the load.
	const timeout = 2 * time.Second
	l, err := New(clients(t, s), WithNodeTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	k := keyFor(t)
	warm, err := l.TryLock(ctx, k) // connections dialled, scripts loaded
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)
	if err := s[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer s[2].Resume()
	begin := time.Now()
	lk, err := l.TryLock(ctx, k)
	if took := time.Since(begin); took >= timeout {
		t.Errorf("TryLock with a paused node took %v, want under the per-node timeout %v", took, timeout)
	}
	if err != nil {
		t.Fatalf("TryLock with a paused node: %v", err)
	}
	lk.Unlock(ctx)

	// Three paused: the attempt gives up at the per-node timeout.
	s[0].Pause()
	s[4].Pause()
	defer s[0].Resume()
	defer s[4].Resume()
	begin = time.Now()
	_, err = l.TryLock(ctx, k)
	took := time.Since(begin)
	if !errors.Is(err, ErrNoQuorum) {
		t.Errorf("TryLock with 3 of 5 paused: %v, want ErrNoQuorum", err)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("TryLock with 3 of 5 paused took %v, want about the per-node timeout %v", took, timeout)
	}
}

// Fences rise strictly over 1,000 acquisitions while nodes are killed and
// restarted empty, each staying down for the restart delay: in turn, and
// by two at once, so that over the run every node loses its counter
// and the counters of a majority are lost between two acquisitions.
func TestFencesRiseThroughRestarts(t *testing.T) {
	s := start(t, 5)
	l := newLocker(t, s)
	ctx := context.Background()
	k := keyFor(t)
	const ttl = 400 * time.Millisecond
	delay := RestartDelay(ttl)
	var (
		last  uint64
		down  []int
		downd time.Time
		turn  int
	)
	// At least 1,000 acquisitions, and as many more as six rounds of
	// restarts take.
	const rounds = 6
	begin := time.Now()
	for i := 0; i < 1000 || turn < rounds || down != nil; i++ {
		if time.Since(begin) > time.Minute {
			t.Fatalf("%d acquisitions and %d rounds of restarts in a minute", i, turn)
		}
		if down == nil && i%10 == 5 && turn < rounds {
			// kill one or two nodes (two every third time)
			down = []int{turn % 5}
			if turn%3 == 2 {
				down = append(down, (turn+2)%5)
			}
			turn++
			for _, j := range down {
				s[j].Kill()
			}
			downd = time.Now()
		}
		if down != nil && time.Since(downd) >= delay {
			for _, j := range down {
				if err := s[j].Restart(); err != nil {
					t.Fatal(err)
				}
			}
			down = nil
		}
		// Lock, not TryLock: a node that answered an acquisition late may
		// keep it until its lease ends (see Unlock), and with two nodes
		// down that one node is enough to make the next attempt busy.
		lk, err := l.Lock(ctx, k, dlock.WithLease(ttl), dlock.WithWait(5*ttl))
		if err != nil {
			t.Fatalf("acquisition %d (nodes %v down): %v", i, down, err)
		}
		if lk.Fence() <= last {
			t.Fatalf("acquisition %d: fence %d after %d", i, lk.Fence(), last)
		}
		last = lk.Fence()
		// A release that too few nodes answered in time (a loaded
		// machine, two nodes down) leaves the lease to lapse, and the
		// handle held until its deadline: a Lock of the key by this
		// Locker before then is ErrAlreadyHeld, so wait for it.
		if err := lk.Unlock(ctx); errors.Is(err, ErrNoQuorum) {
			select {
			case <-lk.Done():
			case <-time.After(2 * ttl):
				t.Fatalf("Unlock %d of unknown outcome: the handle did not end within its lease", i)
			}
		} else if err != nil {
			t.Fatalf("Unlock %d: %v", i, err)
		}
	}
}

// proxy forwards TCP to a server until cut: then it forwards nothing,
// in either direction, while keeping the connections open, as a network
// partition would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			wg.Go(func() { p.pipe(s, c) })
			wg.Go(func() { p.pipe(c, s) })
		}
	})
	return p
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
}

// A holder cut off from a majority of the nodes learns that its lock is
// lost before anyone else can take the lock: the other party reaches
// every node, and takes the lock as soon as the cut-off holder's keys
// expire there.
func TestCutOffHolderLearnsFirst(t *testing.T) {
	s := start(t, 5)
	proxies := make([]*proxy, 5)
	cs := make([]redis.UniversalClient, 5)
	for i, srv := range s {
		proxies[i] = newProxy(t, srv.Addr())
		o := srv.Options()
		o.Addr, o.ContextTimeoutEnabled, o.MaxRetries = proxies[i].ln.Addr().String(), true, -1
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	holder, err := New(cs, WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, c := range cs { // dial through the proxies before the clock matters
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	other := newLocker(t, s)
	ctx := context.Background()
	k := keyFor(t)
	const ttl = 400 * time.Millisecond
	// Under load a first attempt through the proxies can miss the 100ms
	// node timeout; the test is about what follows the cut, so the holder
	// tries again until it holds.
	var lk dlock.Lock
	dlocktest.Eventually(t, 10*time.Second, "the holder's TryLock", func() bool {
		lk, err = holder.TryLock(ctx, k, dlock.WithTTL(ttl))
		if err != nil && !errors.Is(err, dlock.ErrNotAcquired) && !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("the holder's TryLock: %v", err)
		}
		return err == nil
	})
	for _, i := range []int{0, 2, 3} {
		proxies[i].setCut(true)
	}
	cutAt := time.Now()
	var got dlock.Lock
	for got == nil {
		if time.Since(cutAt) > 10*ttl {
			t.Fatal("the other party did not get the lock within ten leases of the cut")
		}
		l2, err := other.TryLock(ctx, k, dlock.WithTTL(ttl))
		switch {
		case err == nil:
			got = l2
		case !errors.Is(err, dlock.ErrNotAcquired):
			t.Fatalf("the other party's TryLock: %v", err)
		}
	}
	select {
	case <-lk.Done():
	default:
		t.Fatalf("the other party took the lock %v after the cut while the holder still held it", time.Since(cutAt))
	}
	if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
		t.Errorf("the holder's Err() = %v, want ErrLeaseExpired", lk.Err())
	}
	got.Unlock(ctx)
	for _, p := range proxies {
		p.setCut(false)
	}
}

var _ = redistest.Start
