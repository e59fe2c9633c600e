package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workers are the worker processes, by worker number.
type workers struct {
	cfg   Config
	addrs []string
	store string
	phase int // 0: starting, 1: running, 2: finished

	mu      sync.Mutex
	procs   map[int]*exec.Cmd
	stdins  map[int]*os.File      // the write end of each worker's stdin: "go", then closed at the end
	readys  map[int]chan struct{} // closed when the worker says it is ready
	proxies map[int][]*proxy      // each worker's way to each server
	incarn  map[int]int
	kills   map[string]int64   // "<worker>.<incarnation>" -> when it was killed
	pauses  map[int][][2]int64 // worker -> its pauses
	hung    map[string]bool    // incarnations killed because they did not stop by themselves
}

func (ws *workers) start(w int) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.incarn == nil {
		ws.incarn, ws.kills, ws.pauses, ws.hung = map[int]int{}, map[string]int64{}, map[int][][2]int64{}, map[string]bool{}
		ws.stdins, ws.readys = map[int]*os.File{}, map[int]chan struct{}{}
	}
	if _, ok := ws.proxies[w]; !ok && ws.cfg.Backend != "cluster" {
		for _, a := range ws.addrs {
			p, err := startProxy(strings.TrimPrefix(a, "http://"))
			if err != nil {
				return err
			}
			ws.proxies[w] = append(ws.proxies[w], p)
		}
	}
	var addrs []string
	for i, p := range ws.proxies[w] {
		addrs = append(addrs, strings.TrimSuffix(ws.addrs[i], strings.TrimPrefix(ws.addrs[i], "http://"))+p.addr())
	}
	if ws.cfg.Backend == "cluster" {
		addrs = ws.addrs
	}
	cfg := workerConfig{
		Backend: ws.cfg.Backend, Addrs: addrs, Key: workerKey, TTL: ws.cfg.TTL, Wait: ws.cfg.Wait,
		Hold: ws.cfg.Hold, Store: ws.store, Worker: w, Incarnation: ws.incarn[w],
		Out: filepath.Join(ws.cfg.Dir, fmt.Sprintf("worker-%d.jsonl", w)), Seed: ws.cfg.Seed,
		CLI: ws.cfg.CLI, Self: ws.cfg.Worker, Primitive: ws.cfg.Primitive, Limit: ws.cfg.Limit, NoAck: ws.cfg.NoAck,
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd := exec.Command(ws.cfg.Worker[0], ws.cfg.Worker[1:]...)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	// A group of its own: a fault hits the worker and what it started
	// (dlock run and its CMD), as it would hit a machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The worker says "ready" on its stdout, and reads the run's end on
	// its stdin (awaitStart).
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("faults: start worker %d: %w", w, err)
	}
	ready := make(chan struct{})
	go func() {
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		if sc.Scan() {
			close(ready)
		}
		for sc.Scan() { // the rest, until the worker ends
		}
	}()
	ws.procs[w], ws.readys[w], ws.stdins[w] = cmd, ready, inW
	if ws.phase == 1 {
		fmt.Fprintln(inW, "go") // a worker that died meanwhile is seen by the run
	}
	return nil
}

// ready waits until every worker started so far said it is ready, or
// within timeout.
func (ws *workers) ready(ctx context.Context, timeout time.Duration) error {
	ws.mu.Lock()
	readys := maps.Clone(ws.readys)
	ws.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for w, r := range readys {
		select {
		case <-r:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("faults: worker %d not ready after %v", w, timeout)
		}
	}
	return nil
}

// begin lets the workers go.
func (ws *workers) begin() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.phase = 1
	for _, in := range ws.stdins {
		fmt.Fprintln(in, "go")
	}
}

// finish tells the workers that the run is over: they stop after the
// hold they are in.
func (ws *workers) finish() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.phase = 2
	for w, in := range ws.stdins {
		in.Close()
		delete(ws.stdins, w)
	}
}

// kill kills worker w and starts it again as its next incarnation; it
// returns the incarnation it killed, "<worker>.<incarnation>".
func (ws *workers) kill(w int) string {
	ws.mu.Lock()
	cmd := ws.procs[w]
	ws.mu.Unlock()
	signalGroup(cmd, syscall.SIGKILL)
	cmd.Wait()
	ws.mu.Lock()
	inc := fmt.Sprintf("%d.%d", w, ws.incarn[w])
	ws.kills[inc] = now()
	ws.incarn[w]++
	if in := ws.stdins[w]; in != nil {
		in.Close()
		delete(ws.stdins, w)
	}
	running := ws.phase == 1
	ws.mu.Unlock()
	if running {
		ws.start(w)
	}
	return inc
}

// pause stops worker w for d, then lets it go on.
func (ws *workers) pause(ctx context.Context, w int, d time.Duration) (int64, int64) {
	ws.mu.Lock()
	cmd := ws.procs[w]
	ws.mu.Unlock()
	t0 := now()
	signalGroup(cmd, syscall.SIGSTOP)
	sleep(ctx, d) // the fault itself: the worker stays stopped this long
	signalGroup(cmd, syscall.SIGCONT)
	t1 := now()
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, t1})
	ws.mu.Unlock()
	return t0, t1
}

// waitAll waits grace for the workers to stop by themselves, and longer
// by the time the machine did not run the harness meanwhile (stalled
// reads it; two minutes more at most), killing those still running then
// (hung).
func (ws *workers) waitAll(grace time.Duration, stalled func() int64) {
	ws.mu.Lock()
	procs := make(map[string]*exec.Cmd, len(ws.procs))
	for w, c := range ws.procs {
		procs[fmt.Sprintf("%d.%d", w, ws.incarn[w])] = c
	}
	ws.mu.Unlock()
	deadline, counted, extended := now()+int64(grace), stalled(), int64(0)
	for inc, c := range procs {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		for waiting := true; waiting; {
			t := time.NewTimer(time.Duration(max(deadline-now(), 0)))
			select {
			case <-done:
				waiting = false
			case <-t.C:
				if extra := stalled() - counted; extra > 0 && extended < int64(2*time.Minute) {
					counted, extended, deadline = counted+extra, extended+extra, deadline+extra
					break
				}
				signalGroup(c, syscall.SIGKILL)
				<-done
				ws.mu.Lock()
				ws.hung[inc] = true
				ws.mu.Unlock()
				waiting = false
			}
			t.Stop()
		}
	}
}

// network cuts worker w off from the servers (cut), or delays what flows
// between them by delay, for d; then heals. With only, it does so on the
// way to those servers (by index) alone.
func (ws *workers) network(ctx context.Context, w int, cut bool, delay, d time.Duration, only ...int) {
	ws.mu.Lock()
	ps := ws.proxies[w]
	ws.mu.Unlock()
	if len(only) > 0 {
		var some []*proxy
		for _, i := range only {
			some = append(some, ps[i])
		}
		ps = some
	}
	t0 := now()
	for _, p := range ps {
		p.setCut(cut)
		p.setDelay(delay)
	}
	sleep(ctx, d) // the fault: the network stays bad this long
	for _, p := range ps {
		p.setCut(false)
		p.setDelay(0)
	}
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, now()})
	ws.mu.Unlock()
}

// replies sets the reply fault f on worker w's way to the servers for d,
// and returns how many commands it hit.
func (ws *workers) replies(ctx context.Context, w int, f replyFault, d time.Duration) int {
	ws.mu.Lock()
	ps := ws.proxies[w]
	ws.mu.Unlock()
	t0 := now()
	for _, p := range ps {
		p.setReplies(f)
	}
	sleep(ctx, d) // the fault: the replies stay bad this long
	hits := 0
	for _, p := range ps {
		hits += p.setReplies(passReplies)
	}
	ws.mu.Lock()
	ws.pauses[w] = append(ws.pauses[w], [2]int64{t0, now()})
	ws.mu.Unlock()
	return hits
}

func (ws *workers) closeProxies() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ps := range ws.proxies {
		for _, p := range ps {
			p.close()
		}
	}
}

func (ws *workers) stopAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, c := range ws.procs {
		signalGroup(c, syscall.SIGKILL)
		c.Wait()
	}
}
