package redislock

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
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
