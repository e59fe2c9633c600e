package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// redlockServers starts three independent servers and returns them with
// the --redis URL that names them for Redlock. Its read_timeout of 2s
// bounds each request to one node: the driver's 100ms is too little for a
// busy machine running the race detector.
func redlockServers(t *testing.T) ([]*redistest.Server, string) {
	s := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	return s, "redis+redlock://" + s[0].Addr() + "?read_timeout=2s," + s[1].Addr() + ",redis://" + s[2].Addr()
}

// newRedlock returns a Locker over clients whose requests to one node are
// bounded by 2s, as the URLs of redlockServers.
func newRedlock(t *testing.T, clients []redis.UniversalClient) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(clients, redlock.WithNodeTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// dlock run over Redlock: jobs never overlap and their fences rise.
func TestRedlockRun(t *testing.T) {
	_, url := redlockServers(t)
	mutualExclusion(t, 4, 5, func(args ...string) []string {
		return append([]string{args[0], "--redis", url}, args[1:]...)
	})
}

// status and ls report what a majority holds, also with a node down.
func TestRedlockStatusAndLs(t *testing.T) {
	t.Parallel() // its own servers, keys or prefix; it waits, not computes
	s, url := redlockServers(t)
	cs := make([]redis.UniversalClient, len(s))
	for i, srv := range s {
		cs[i] = srv.Client(t)
	}
	l := newRedlock(t, cs)
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "report", dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s[1].Kill()
	res := dlockIn(t, []string{"status", "--redis", url, "--json", "report"})
	var j lockJSON
	if err := unmarshalRow(res.stdout, &j); err != nil || !j.Held || j.Fence != lk.Fence() || j.TTLms <= 0 || j.TTLms > 20000 {
		t.Fatalf("status over Redlock with a node down: exit %d, %+v (%v), stderr %q", res.code, j, err, res.stderr)
	}
	res = dlockIn(t, []string{"ls", "--redis", url})
	if res.code != 0 || !strings.Contains(res.stdout, "report") {
		t.Fatalf("ls over Redlock: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	res = dlockIn(t, []string{"status", "--redis", url, "--json", "report"})
	j = lockJSON{}
	if err := unmarshalRow(res.stdout, &j); err != nil || j.Held {
		t.Fatalf("status of a released key over Redlock: exit %d, %+v (%v), stderr %q", res.code, j, err, res.stderr)
	}

	// Two of three down: no majority to read, and dlock says so.
	s[2].Kill()
	res = dlockIn(t, []string{"status", "--redis", url, "report"})
	if res.code != exitUnavailable {
		t.Fatalf("status with 1 of 3 nodes up: exit %d, want %d; stderr %q", res.code, exitUnavailable, res.stderr)
	}
}

func TestParseRedlockURL(t *testing.T) {
	opts, err := parseRedlockURL("redis+redlock://u:pw@10.0.0.1:7000/2?dial_timeout=3s,10.0.0.2:7001,redis://10.0.0.3:7002/0", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 3 || opts[0].Addr != "10.0.0.1:7000" || opts[1].Addr != "10.0.0.2:7001" || opts[2].Addr != "10.0.0.3:7002" {
		t.Fatalf("addresses: %v", opts)
	}
	if opts[1].Password != "pw" || opts[1].DB != 2 || opts[1].DialTimeout != 3*time.Second || opts[2].DB != 0 {
		t.Errorf("a HOST:PORT node takes the first URL's settings: %+v", opts[1])
	}
	for _, bad := range []string{
		"redis+redlock://h1:1,h2:2",                     // two nodes
		"redis+redlock://h1:1,h2,h3:3",                  // no port
		"redis+redlock://u:secret@h1:1,h2:2,ftp://h3:3", // bad element
	} {
		_, err := parseRedlockURL(bad, "")
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}

// pausing is a backend whose Inspect first stops servers for a while.
type pausing struct {
	backend
	stop func()
}

func (p pausing) Inspect(ctx context.Context, key string) (dlock.Info, error) {
	p.stop()
	return p.backend.Inspect(ctx, key)
}

// read_timeout in a Redlock URL bounds each request to one node, rather
// than being cut to the driver's default of 100ms: with two of three
// nodes stopped for 500ms as status reads them, status with
// read_timeout=5s waits for them.
func TestRedlockReadTimeout(t *testing.T) {
	s, _ := redlockServers(t)
	url := "redis+redlock://" + s[0].Addr() + "?read_timeout=5s," + s[1].Addr() + "," + s[2].Addr()
	resume := func() {
		for _, srv := range s[1:] {
			srv.Resume()
		}
	}
	t.Cleanup(resume)
	stop := func() {
		for _, srv := range s[1:] {
			if err := srv.Pause(); err != nil {
				t.Error(err)
			}
		}
		time.AfterFunc(500*time.Millisecond, resume) // the fault's length, not a wait for an event
	}
	res := dlockInEnv(t, []string{"status", "--redis", url, "k"}, func(e *env) {
		e.wrapBackend = func(be backend) backend { return pausing{be, stop} }
	})
	if res.code != 0 {
		t.Errorf("status with two of three nodes stopped for 500ms and read_timeout=5s: exit %d, stderr %q", res.code, res.stderr)
	}
}
