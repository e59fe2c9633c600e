package etcdlock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/logrec"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// messages are every message the etcd driver logs.
var messages = []string{"released", "lock lost", "attempt failed, waiting on", "force unlock: lease lookup failed"}

// The logs follow the conventions: static messages, snake_case keys, no
// token; a release is logged at Debug and a loss at Warn, and a Locker
// whose logger is at Info logs nothing on the path of an acquisition and
// its release.
func TestLogConventions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := logrec.New(slog.LevelDebug)
	cli := client(t)
	l := newLocker(t, cli, dlock.WithLogger(slog.New(h)))
	const key = "log:conventions"
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lost, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, l.RangeOf(key), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the loss: Done still open after 5s")
	}
	levels := map[string]slog.Level{}
	for _, r := range h.Records() {
		levels[r.Message] = r.Level
		if err := logrec.Conventions(r, messages, lk.Token(), lost.Token()); err != nil {
			t.Error(err)
		}
		if r.Attrs["component"] != "dlock" || r.Attrs["key"] != key {
			t.Errorf("%q: component %q, key %q; want dlock, %q", r.Message, r.Attrs["component"], r.Attrs["key"], key)
		}
	}
	for msg, want := range map[string]slog.Level{"released": slog.LevelDebug, "lock lost": slog.LevelWarn} {
		if got, ok := levels[msg]; !ok || got != want {
			t.Errorf("%q logged at %v (seen: %v), want %v", msg, got, ok, want)
		}
	}

	quiet := logrec.New(slog.LevelInfo)
	l = newLocker(t, cli, dlock.WithLogger(slog.New(quiet)))
	for range 3 {
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if recs := quiet.Records(); len(recs) > 0 {
		t.Errorf("acquisitions and releases logged above Debug: %+v", recs)
	}
}
