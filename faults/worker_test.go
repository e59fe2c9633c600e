package faults

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A worker killed in the middle of a Downgrade call leaves a history in
// which the call may have taken effect: the readers the server then lets in
// beside the writer are the downgrade's doing, not a violation. So the call
// must be on record before it is made, not only once it returns.
func TestSectionRecordsCallsBeforeMakingThem(t *testing.T) {
	st, err := startStore(3)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	name := filepath.Join(t.TempDir(), "worker-0.jsonl")
	hist, err := openLogFile(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hist.f.Close()

	for _, call := range []string{"down", "refresh"} {
		called, hang := make(chan struct{}), make(chan struct{})
		var once sync.Once
		block := func() error { once.Do(func() { close(called) }); <-hang; return nil }
		noop := func() error { return nil }
		down, refresh := noop, noop
		if call == "down" {
			down = block
		} else {
			refresh = block
		}
		cfg := workerConfig{Store: st.url, TTL: time.Second, Hold: time.Millisecond}
		ts := []target{{key: "faults", kind: exclusive, fence: 1}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			section(cfg, hist, rand.New(rand.NewPCG(1, 2)), "0.0."+call, ts, refresh, down)
		}()
		select {
		case <-called:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the section made no call in 10s", call)
		}
		// The process dies here: what is on record is all there is.
		var begun bool
		for _, e := range readEvents(t, name) {
			begun = begun || e.Hold == "0.0."+call && e.E == call && e.End == 0
		}
		close(hang)
		<-done
		if !begun {
			t.Errorf("a %s call under way is not on record: a worker killed in it leaves a history without it", call)
		}
	}
}

func readEvents(t *testing.T, name string) []event {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var es []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// A dlock run that the machine is too loaded to run for a while records
// that while as a stall of its worker: here the command shares one CPU
// with three busy loops, and waits for it about three times as long as it
// runs.
func TestRunWatchedRecordsTheWaitForACPU(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatalf("taskset (util-linux) pins the processes to one CPU: %v", err)
	}
	for range 3 {
		busy := exec.Command("taskset", "-c", "0", "sh", "-c", "while :; do :; done")
		if err := busy.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	}
	name := filepath.Join(t.TempDir(), "worker-0.jsonl")
	hist, err := openLogFile(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hist.f.Close()
	// About 200ms of CPU for the shell, so 600ms or so of waiting.
	cmd := exec.Command("taskset", "-c", "0", "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	start := now()
	if err := runWatched(cmd, hist); err != nil {
		t.Fatal(err)
	}
	end := now()
	var stalled int64
	for _, e := range readEvents(t, name) {
		if e.E != "stall" || e.T < start || e.End > end {
			t.Fatalf("a stall outside the command's run: %+v", e)
		}
		stalled += e.End - e.T
	}
	if ran := end - start; stalled < ran/4 {
		t.Errorf("the command ran %v sharing a CPU with three busy loops; %v of it is recorded as stalled, want a quarter at least", time.Duration(ran), time.Duration(stalled))
	}
}
