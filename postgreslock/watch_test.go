package postgreslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/postgreslock"
	"github.com/dlock-go/dlock/postgreslock/pgtest"
	"github.com/jackc/pgx/v5"
)

// A Close that runs to its end while Watch is starting: Watch returns
// ErrClosed, or a channel that Close closed; no goroutine of the watch
// outlives Close.
func TestWatchRacesClose(t *testing.T) {
	l := newLocker(t, pool(t, ""))
	closed := make(chan error, 1)
	postgreslock.SetBeforeWatchStart(l, func() {
		go func() { closed <- l.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("Close did not return within 10s")
		}
	})
	c, err := l.Watch(context.Background(), t.Name())
	if err != nil {
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Watch during Close: %v, want ErrClosed", err)
		}
		return
	}
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		default:
			t.Fatal("Watch during Close returned a channel that is still open once Close returned")
		}
	}
}

// The connection of the LISTEN session goes silent without closing (the
// server's host vanished): the session notices within its ping bound and
// connects again, and the watch hears the next change.
func TestListenSessionStalled(t *testing.T) {
	proxy, err := pgtest.NewProxy(shared.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	p := pool(t, "")
	listen, err := pgx.ParseConfig("postgres://postgres@" + proxy.Addr() + "/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	l, err := postgreslock.New(p, postgreslock.WithListen(listen))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	postgreslock.SetListenPing(l, 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := l.Watch(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	<-c // in place
	if n := postgreslock.ListenSessions(l); n != 1 {
		t.Fatalf("%d LISTEN sessions once the watch is in place, want 1", n)
	}
	proxy.Stall()
	deadline := time.Now().Add(10 * time.Second)
	for postgreslock.ListenSessions(l) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the LISTEN session is still the stalled one after 10s")
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by deadline
	}
	for len(c) > 0 {
		<-c // the reconnection's
	}
	lk, err := newLocker(t, p).TryLock(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not hear an acquisition after the session came back")
	}
}
