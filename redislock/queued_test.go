package redislock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// gatedLocker returns a Locker over a client of the shared server whose
// commands wait at g, and its coalescer.
func gatedLocker(t *testing.T, g *gate, opts ...dlock.Option) (*Locker, *redisnode.Coalescer) {
	t.Helper()
	c := shared.Client(t)
	c.AddHook(g)
	l := lockerOf(t, c, opts...)
	t.Cleanup(g.letThrough) // before Close, which a closed gate would hold up
	co, ok := l.send.(*redisnode.Coalescer)
	if !ok {
		t.Fatal("a *redis.Client got no coalescer")
	}
	return l, co
}

// tryLock calls l.TryLock(ctx, key) from a goroutine of its own and
// delivers its error.
func tryLock(ctx context.Context, l *Locker, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := l.TryLock(ctx, key)
		done <- err
	}()
	return done
}

// An attempt that finds every flush busy waits in the coalescer's queue on
// its caller's goroutine (no worker starts), and a goroutine of the Locker
// sends it once the flushes end: the lock is taken.
func TestQueuedAttemptSent(t *testing.T) {
	g := newGate()
	l, co := gatedLocker(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key+":n")
	got := tryLock(context.Background(), l, key)
	dlocktest.Eventually(t, 5*time.Second, "the attempt queued", func() bool { _, q := co.Busy(); return q == 1 })
	if n := l.reqs.started.Load(); n != 0 {
		t.Fatalf("%d workers started for a queued attempt, want none", n)
	}
	g.letThrough()
	if err := within(t, got, 5*time.Second, "the queued attempt"); err != nil {
		t.Fatalf("queued TryLock: %v", err)
	}
	for _, ch := range first {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := shared.Client(t).Exists(context.Background(), l.opts.Prefix+":lock:"+key).Result(); err != nil || v != 1 {
		t.Fatalf("the lock key exists: %d (%v), want 1", v, err)
	}
	dlocktest.Eventually(t, 5*time.Second, "the coalescer idle", func() bool { f, q := co.Busy(); return f == 0 && q == 0 })
}

// An attempt whose context ends while it waits in the queue returns at
// once, and is never sent.
func TestQueuedAttemptCancelledUnsent(t *testing.T) {
	g := newGate()
	l, co := gatedLocker(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key+":n")
	ctx, cancel := context.WithCancel(context.Background())
	got := tryLock(ctx, l, key)
	dlocktest.Eventually(t, 5*time.Second, "the attempt queued", func() bool { _, q := co.Busy(); return q == 1 })
	cancel()
	if err := within(t, got, 5*time.Second, "the cancelled attempt"); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock cancelled in the queue: %v, want context.Canceled", err)
	}
	if _, q := co.Busy(); q != 0 {
		t.Fatalf("%d commands queued after the cancellation, want 0", q)
	}
	g.letThrough()
	for _, ch := range first {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	dlocktest.Eventually(t, 5*time.Second, "the coalescer idle", func() bool { f, q := co.Busy(); return f == 0 && q == 0 })
	if v, err := shared.Client(t).Exists(context.Background(), l.opts.Prefix+":lock:"+key).Result(); err != nil || v != 0 {
		t.Fatalf("the lock key exists: %d (%v): the cancelled attempt was sent", v, err)
	}
}

// An attempt whose context ends while its pipeline is on the wire returns
// at once; the pipeline takes the lock when it goes through, and the
// Locker gives it back.
func TestQueuedAttemptLeftOnTheWire(t *testing.T) {
	g := newGate()
	g.pipes = make(chan struct{})
	l, co := gatedLocker(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key+":n")
	// An INCR queued before the attempt leads the next pipeline, which
	// the gate holds (it starts with an INCR).
	lead := incr(context.Background(), co, key+":n")
	dlocktest.Eventually(t, 5*time.Second, "the INCR queued", func() bool { _, q := co.Busy(); return q == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	got := tryLock(ctx, l, key)
	dlocktest.Eventually(t, 5*time.Second, "the attempt queued", func() bool { _, q := co.Busy(); return q == 2 })
	g.openAlone()
	dlocktest.Eventually(t, 5*time.Second, "the pipeline at the gate", func() bool { return g.piped.Load() == 1 })
	cancel()
	err := within(t, got, 5*time.Second, "the attempt left on the wire")
	var nerr net.Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &nerr) {
		t.Fatalf("TryLock cancelled on the wire: %v, want context.Canceled and a net.Error", err)
	}
	g.openPipes()
	for _, ch := range append(first, lead) {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	raw := shared.Client(t)
	dlocktest.Eventually(t, 5*time.Second, "the abandoned attempt's lock given back", func() bool {
		v, err := raw.Exists(context.Background(), l.opts.Prefix+":lock:"+key).Result()
		return err == nil && v == 0
	})
	if _, err := l.TryLock(context.Background(), key); err != nil {
		t.Fatalf("TryLock after the give-back: %v", err)
	}
}

// A queued command whose reply came before its caller left is answered:
// Leave says so and runs nothing late.
func TestQueuedRepliedBeforeLeave(t *testing.T) {
	g := newGate()
	_, co := gatedLocker(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key)
	cmd := redis.NewIntCmd(context.Background(), "incr", key+":q") // a key of its own: the flushes may end after it
	q, ok := co.Queue(cmd)
	if !ok {
		t.Fatal("Queue with every flush busy did not queue")
	}
	g.letThrough()
	for _, ch := range first {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	dlocktest.Eventually(t, 5*time.Second, "the coalescer idle", func() bool { f, q := co.Busy(); return f == 0 && q == 0 })
	if got := q.Leave(func() { t.Error("late ran for an answered command") }); got != redisnode.Replied {
		t.Fatalf("Leave after the reply = %d, want Replied (%d)", got, redisnode.Replied)
	}
	within(t, q.Done(), time.Second, "the answered command's done")
	q.Answered()
	if n, err := cmd.Result(); err != nil || n != 1 {
		t.Fatalf("INCR = %d, %v; want 1", n, err)
	}
}
