package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// On the demo's in-process stand-in, a release wakes its waiter as it does
// on redis-server. The waiter's fallback sleep here is a minute, longer
// than its wait: only the wake-up can get it the lock in time.
func TestStandInWakesWaiters(t *testing.T) {
	srv, err := startStandIn("testing the stand-in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	newLocker := func() *redislock.Locker {
		c := redis.NewClient(&redis.Options{Addr: srv.addr})
		t.Cleanup(func() { c.Close() })
		l, err := redislock.New(c, dlock.WithTTL(time.Minute), dlock.WithRetry(dlock.FixedInterval(time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	holder, waiter := newLocker(), newLocker()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held, err := holder.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, "k", dlock.WithWait(20*time.Second))
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	for { // until the waiter has queued
		info, err := holder.Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the waiter never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter was not woken by the release: %v", err)
	}
}

// The stand-in's sharded pub/sub speaks the protocol go-redis expects:
// confirmations, messages to each subscriber of the channel only, and
// SPUBLISH's count of receivers.
func TestStandInShardedPubSub(t *testing.T) {
	srv, err := startStandIn("testing the stand-in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	c := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ps := c.SSubscribe(ctx, "a", "b")
	defer ps.Close()
	for _, want := range []string{"a", "b"} {
		m, err := ps.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := m.(*redis.Subscription)
		if !ok || s.Kind != "ssubscribe" || s.Channel != want {
			t.Fatalf("confirmation: got %#v, want ssubscribe %s", m, want)
		}
	}
	if n, err := c.SPublish(ctx, "a", "hello").Result(); err != nil || n != 1 {
		t.Fatalf("SPUBLISH a: %d, %v; want 1 receiver", n, err)
	}
	if n, err := c.SPublish(ctx, "elsewhere", "x").Result(); err != nil || n != 0 {
		t.Fatalf("SPUBLISH elsewhere: %d, %v; want 0 receivers", n, err)
	}
	m, err := ps.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg, ok := m.(*redis.Message); !ok || msg.Channel != "a" || msg.Payload != "hello" {
		t.Fatalf("got %#v, want the message on a", m)
	}
	if err := ps.SUnsubscribe(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if m, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	} else if s, ok := m.(*redis.Subscription); !ok || s.Kind != "sunsubscribe" || s.Channel != "a" || s.Count != 1 {
		t.Fatalf("got %#v, want sunsubscribe a with 1 left", m)
	}
	if n, err := c.SPublish(ctx, "a", "again").Result(); err != nil || n != 0 {
		t.Fatalf("SPUBLISH a after SUNSUBSCRIBE: %d, %v; want 0", n, err)
	}
	if err := ps.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*redis.Pong); !ok {
		t.Fatalf("got %#v after PING, want a pong", m)
	}
	if err := c.Do(ctx, "SSUBSCRIBE").Err(); err == nil {
		t.Fatal("SSUBSCRIBE without a channel was accepted")
	}
	if err := c.Do(ctx, "SPUBLISH", "a").Err(); err == nil {
		t.Fatal("SPUBLISH without a message was accepted")
	}
}

// On the stand-in, one held lock is renewed as on redis-server: the
// watchdog's batch of one lock is read as a batch of one (the stand-in
// made a one-character reply a number, and the lock was lost at its first
// renewal).
func TestStandInRenewsOneLock(t *testing.T) {
	t.Parallel()
	srv, err := startStandIn("testing the stand-in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	c := redis.NewClient(&redis.Options{Addr: srv.addr})
	t.Cleanup(func() { c.Close() })
	const ttl = time.Second
	l, err := redislock.New(c, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "renewed")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Done():
		t.Fatalf("lost within three leases: %v", lk.Err())
	case <-time.After(3 * ttl): // three leases: renewed six times or more
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after three leases: %v", err)
	}
}
