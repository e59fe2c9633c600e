package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// gate is a go-redis hook that holds every command sent alone until open
// is closed, and records the size of every pipeline; with pipes not nil,
// it holds every pipeline of INCRs until pipes is closed.
type gate struct {
	open    chan struct{}
	pipes   chan struct{}
	held    atomic.Int32 // commands sent alone, waiting at the gate
	piped   atomic.Int32 // pipelines waiting at the gate
	mu      sync.Mutex
	batches []int

	opened, pipesOpened sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

// openAlone lets the commands sent alone through, from now on.
func (g *gate) openAlone() { g.opened.Do(func() { close(g.open) }) }

// openPipes lets the pipelines through, from now on.
func (g *gate) openPipes() {
	if g.pipes != nil {
		g.pipesOpened.Do(func() { close(g.pipes) })
	}
}

// letThrough opens the gate for every command.
func (g *gate) letThrough() {
	g.openAlone()
	g.openPipes()
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.held.Add(1)
		<-g.open
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.mu.Lock()
		g.batches = append(g.batches, len(cmds))
		g.mu.Unlock()
		if g.pipes != nil && cmds[0].Name() == "incr" { // not a connection's set-up
			g.piped.Add(1)
			<-g.pipes
		}
		return next(ctx, cmds)
	}
}

// gated returns a coalescer over a client of the shared server whose
// commands wait at g.
func gated(t *testing.T, g *gate) *redisnode.Coalescer {
	t.Helper()
	c := shared.Client(t)
	c.AddHook(g)
	co, ok := newProcessor(c).(*redisnode.Coalescer)
	if !ok {
		t.Fatal("a *redis.Client got no coalescer")
	}
	return co
}

// incr sends INCR key through p from a goroutine of its own and delivers
// the command once answered.
func incr(ctx context.Context, p redisnode.Processor, key string) <-chan *redis.IntCmd {
	done := make(chan *redis.IntCmd, 1)
	go func() {
		cmd := redis.NewIntCmd(ctx, "incr", key)
		_ = p.Process(ctx, cmd)
		done <- cmd
	}()
	return done
}

// fillFlushes starts redisnode.MaxFlushes commands that go out alone and waits until
// all of them are held at the gate.
func fillFlushes(t *testing.T, co *redisnode.Coalescer, g *gate, key string) []<-chan *redis.IntCmd {
	t.Helper()
	var first []<-chan *redis.IntCmd
	for range redisnode.MaxFlushes {
		first = append(first, incr(context.Background(), co, key))
	}
	dlocktest.Eventually(t, 5*time.Second, "every flush at the gate", func() bool { return g.held.Load() == redisnode.MaxFlushes })
	return first
}

// Commands that find every flush busy leave together in one pipeline, sent
// by the goroutine of the first of them.
func TestCoalesceQueued(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	co := gated(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key)
	const queued = 10
	var rest []<-chan *redis.IntCmd
	for range queued {
		rest = append(rest, incr(ctx, co, key))
	}
	dlocktest.Eventually(t, 5*time.Second, "commands queued", func() bool { _, q := co.Busy(); return q == queued })
	close(g.open)

	seen := map[int64]bool{}
	for i, ch := range append(first, rest...) {
		cmd := within(t, ch, 5*time.Second, "a reply")
		n, err := cmd.Result()
		if err != nil || n < 1 || n > redisnode.MaxFlushes+queued || seen[n] {
			t.Fatalf("command %d: INCR = %d, %v: want a new value in 1..%d", i, n, err, redisnode.MaxFlushes+queued)
		}
		seen[n] = true
	}
	// At most redisnode.MaxFlushes queued commands are handed a flush before the
	// first of them takes the queue: that one sends the rest with its own.
	g.mu.Lock()
	batches := append([]int(nil), g.batches...)
	g.mu.Unlock()
	biggest := 0
	for _, n := range batches {
		biggest = max(biggest, n)
	}
	if biggest < queued-redisnode.MaxFlushes+1 {
		t.Fatalf("pipelines %v: want one of %d commands or more", batches, queued-redisnode.MaxFlushes+1)
	}
	if f, q := co.Busy(); f != 0 || q != 0 {
		t.Fatalf("after the replies: %d flushes, %d queued; want none", f, q)
	}
}

// A command whose context ends while it waits in the queue is never sent.
func TestCoalesceCancelQueued(t *testing.T) {
	g := newGate()
	co := gated(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key)
	ctx, cancel := context.WithCancel(context.Background())
	late := incr(ctx, co, key)
	dlocktest.Eventually(t, 5*time.Second, "a command queued", func() bool { _, q := co.Busy(); return q == 1 })
	cancel()
	if err := within(t, late, 5*time.Second, "the cancelled command").Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while queued: %v, want context.Canceled", err)
	}
	if _, q := co.Busy(); q != 0 {
		t.Fatalf("%d commands queued after the cancellation, want 0", q)
	}
	close(g.open)
	for _, ch := range first {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := shared.Client(t).Get(context.Background(), key).Int(); err != nil || n != redisnode.MaxFlushes {
		t.Fatalf("the counter is %d (%v), want %d: the cancelled command was sent", n, err, redisnode.MaxFlushes)
	}
	if f, q := co.Busy(); f != 0 || q != 0 {
		t.Fatalf("after the replies: %d flushes, %d queued; want none", f, q)
	}
}

// Under load with contexts that end at random, a command either gets its
// reply or was never sent, and no flush is lost: the counter ends equal to
// the replies, and the coalescer idle.
func TestCoalesceCancelStress(t *testing.T) {
	c := shared.Client(t)
	co, ok := newProcessor(c).(*redisnode.Coalescer)
	if !ok {
		t.Fatal("a *redis.Client got no coalescer")
	}
	key := keyFor(t)
	const goroutines, each = 64, 100
	var (
		replies atomic.Int64
		mu      sync.Mutex
		seen    = map[int64]bool{}
	)
	parallel(t, goroutines, func(int) error {
		for range each {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(300))*time.Microsecond)
			cmd := redis.NewIntCmd(ctx, "incr", key)
			err := co.Process(ctx, cmd)
			cancel()
			switch {
			case err == nil:
				replies.Add(1)
				mu.Lock()
				dup := seen[cmd.Val()]
				seen[cmd.Val()] = true
				mu.Unlock()
				if dup {
					return errors.New("two replies with the same count")
				}
			case !errors.Is(err, context.DeadlineExceeded):
				return err
			}
		}
		return nil
	})
	n, err := c.Get(context.Background(), key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	if n != replies.Load() {
		t.Fatalf("the counter is %d, the replies %d: a command without reply was sent", n, replies.Load())
	}
	t.Logf("%d of %d commands answered", n, goroutines*each)
	if f, q := co.Busy(); f != 0 || q != 0 {
		t.Fatalf("after the load: %d flushes, %d queued; want none", f, q)
	}
}

// A cluster client sends on its own: a cluster pipeline waits for its
// slowest node.
func TestCoalesceNotForCluster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{shared.Addr()}})
	defer cc.Close()
	if _, ok := newProcessor(cc).(*redisnode.Coalescer); ok {
		t.Fatal("a cluster client got a coalescer")
	}
}

// Many goroutines of one Locker lock and unlock keys of their own at once,
// after SCRIPT FLUSH: every cycle succeeds (the release falls back to
// EVAL inside pipelines) and every key is gone at the end.
func TestCoalescedLocker(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared)
	if err := shared.ScriptFlush(ctx); err != nil {
		t.Fatal(err)
	}
	base := keyFor(t)
	const goroutines, cycles = 64, 20
	parallel(t, goroutines, func(i int) error {
		key := base + ":" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		for range cycles {
			lk, err := l.TryLock(ctx, key)
			if err == nil {
				err = lk.Unlock(ctx)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	keys, err := shared.Client(t).Keys(ctx, "*"+base+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left: %v (%v)", keys, err)
	}
	if f, q := l.send.(*redisnode.Coalescer).Busy(); f != 0 || q != 0 {
		t.Fatalf("after the cycles: %d flushes, %d queued; want none", f, q)
	}
}

// parallel runs f(0)…f(n-1) in goroutines of their own and fails t with
// the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs <- f(i) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// While a pipeline is on the wire, the load makes commands queue: a new
// command waits for it and leaves in the next pipeline, rather than going
// out alone beside it (batches as deep as what is in flight).
func TestCoalesceBehindPipeline(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	g.pipes = make(chan struct{})
	co := gated(t, g)
	key := keyFor(t)
	first := fillFlushes(t, co, g, key)
	// More queued commands than flushes end: a flush that ends hands the
	// queue to its first command, and the first of those to run sends the
	// rest in one pipeline.
	var queued []<-chan *redis.IntCmd
	for range redisnode.MaxFlushes + 2 {
		queued = append(queued, incr(ctx, co, key))
	}
	dlocktest.Eventually(t, 5*time.Second, "commands queued", func() bool { _, q := co.Busy(); return q == len(queued) })
	close(g.open)
	for _, ch := range first {
		within(t, ch, 5*time.Second, "a reply sent alone")
	}
	dlocktest.Eventually(t, 5*time.Second, "the queue's pipeline at the gate", func() bool {
		f, _ := co.Busy()
		return g.piped.Load() == 1 && f == 1
	})
	late := incr(ctx, co, key)
	dlocktest.Eventually(t, 5*time.Second, "the new command queued behind the pipeline", func() bool { _, q := co.Busy(); return q == 1 })
	close(g.pipes)
	for _, ch := range append(queued, late) {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if f, q := co.Busy(); f != 0 || q != 0 {
		t.Fatalf("after the replies: %d flushes, %d queued; want none", f, q)
	}
}

// One pipeline at a time: a flush that ends while a pipeline is on the
// wire leaves the commands queued meanwhile to that pipeline's end, so
// that they leave together, in one pipeline as deep as the load, rather
// than in one more of their own.
func TestCoalesceOnePipelineAtATime(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	g.pipes = make(chan struct{})
	// Connections dialled before the gate: a new one's set-up would wait
	// at it too, and this test lets commands through one at a time.
	c := shared.Client(t)
	key := keyFor(t)
	var warm sync.WaitGroup
	for range 2 * redisnode.MaxFlushes {
		warm.Go(func() { c.BLPop(ctx, 100*time.Millisecond, key+":none") })
	}
	warm.Wait()
	c.AddHook(g)
	co, ok := newProcessor(c).(*redisnode.Coalescer)
	if !ok {
		t.Fatal("a *redis.Client got no coalescer")
	}
	solo := fillFlushes(t, co, g, key)
	replied := make(chan *redis.IntCmd, len(solo))
	for _, ch := range solo {
		go func() { replied <- <-ch }()
	}
	var rest []<-chan *redis.IntCmd
	for range 10 {
		rest = append(rest, incr(ctx, co, key))
	}
	dlocktest.Eventually(t, 5*time.Second, "10 commands queued", func() bool { _, q := co.Busy(); return q == 10 })
	g.open <- struct{}{} // one flush ends, and hands the queue to a pipeline
	within(t, replied, 5*time.Second, "the first flush's reply")
	dlocktest.Eventually(t, 5*time.Second, "a pipeline at the gate", func() bool { return g.piped.Load() == 1 })
	for range 5 {
		rest = append(rest, incr(ctx, co, key))
	}
	dlocktest.Eventually(t, 5*time.Second, "5 commands queued behind the pipeline", func() bool { _, q := co.Busy(); return q == 5 })
	g.open <- struct{}{} // a second flush ends while the pipeline is on the wire
	within(t, replied, 5*time.Second, "the second flush's reply")
	if _, q := co.Busy(); q != 5 {
		t.Fatalf("%d commands queued after a flush ended beside a pipeline, want the 5 left for the pipeline's end", q)
	}
	close(g.open)
	close(g.pipes)
	for i, ch := range rest {
		if err := within(t, ch, 5*time.Second, "a reply").Err(); err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	for range len(solo) - 2 {
		within(t, replied, 5*time.Second, "a reply")
	}
	if g.piped.Load() != 2 {
		t.Fatalf("%d pipelines, want 2: the 10 commands, then the 5", g.piped.Load())
	}
	if f, q := co.Busy(); f != 0 || q != 0 {
		t.Fatalf("after the replies: %d flushes, %d queued; want none", f, q)
	}
}
