package redislock

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/logrec"
	"github.com/dlock-go/dlock/internal/syncbuf"
)

func TestLogging(t *testing.T) {
	ctx := context.Background()
	var out syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newLocker(t, shared, dlock.WithLogger(logger))
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lost, err := l.TryLock(ctx, key, dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	shared.Client(t).Del(ctx, "dlock:lock:"+key)
	within(t, lost.Done(), 2*time.Second, "the loss")

	logs := out.String()
	for _, want := range []string{`"msg":"acquired"`, `"msg":"released"`, `"msg":"lock lost"`, `"component":"dlock"`, `"key":"` + key + `"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	for _, tok := range []string{lk.Token(), lost.Token()} {
		if strings.Contains(logs, tok) {
			t.Errorf("a token reached the logs:\n%s", logs)
		}
	}

	// and a Locker without a logger is silent: nothing to observe but that
	// it works with the discard handler
	quiet := newLocker(t, shared)
	if lk, err := quiet.TryLock(ctx, key); err != nil {
		t.Fatal(err)
	} else {
		lk.Unlock(ctx)
	}
}

// messages are every message the Redis driver logs.
var messages = []string{"acquired", "released", "lock lost", "attempt failed, waiting on", "renewal failed", "subscribe failed"}

type traceKey struct{}

// The logs follow the conventions: static messages, snake_case keys, no
// token; the acquisition is logged at Debug with the caller's context (so
// that a handler finds its trace there), and a Locker whose logger is at
// Info logs nothing on the path of an acquisition and its release.
func TestLogConventions(t *testing.T) {
	ctx := context.WithValue(context.Background(), traceKey{}, "trace-1")
	h := logrec.New(slog.LevelDebug)
	l := newLocker(t, shared, dlock.WithLogger(slog.New(h)))
	key := keyFor(t)
	lk, err := l.TryLock(ctx, key, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lost, err := l.TryLock(ctx, key, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	shared.Client(t).Del(ctx, "dlock:lock:"+key)
	within(t, lost.Done(), 2*time.Second, "the loss")

	recs := h.Records()
	levels := map[string]slog.Level{}
	for _, r := range recs {
		levels[r.Message] = r.Level
		if err := logrec.Conventions(r, messages, lk.Token(), lost.Token()); err != nil {
			t.Error(err)
		}
		if r.Attrs["component"] != "dlock" || r.Attrs["key"] != key {
			t.Errorf("%q: component %q, key %q; want dlock, %q", r.Message, r.Attrs["component"], r.Attrs["key"], key)
		}
		if r.Message == "acquired" && r.Ctx.Value(traceKey{}) != "trace-1" {
			t.Error(`"acquired" was not logged with the caller's context`)
		}
	}
	for msg, want := range map[string]slog.Level{"acquired": slog.LevelDebug, "released": slog.LevelDebug, "lock lost": slog.LevelWarn} {
		if got, ok := levels[msg]; !ok || got != want {
			t.Errorf("%q logged at %v (seen: %v), want %v", msg, got, ok, want)
		}
	}

	quiet := logrec.New(slog.LevelInfo)
	l = newLocker(t, shared, dlock.WithLogger(slog.New(quiet)))
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
