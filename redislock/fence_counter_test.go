package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisnode"
)

// A key's fence counter grows by one at each fenced acquisition, and one
// that expired (or was never there) comes back at the server's clock in
// microseconds: above every fence handed out before, and with a day to
// live.
func TestFenceCounter(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, shared, dlock.WithFencing(true))
	key := keyFor(t)
	ks, err := redisnode.Of(dlock.DefaultPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	raw := shared.Client(t)
	fence := func() uint64 {
		t.Helper()
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return lk.Fence()
	}
	before := uint64(time.Now().UnixMicro())
	first := fence()
	if first < before-uint64(time.Minute/time.Microsecond) {
		t.Fatalf("first fence %d: want the server's clock in microseconds (about %d)", first, before)
	}
	if ttl := raw.PTTL(ctx, ks.Meta).Val(); ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("the counter lives %v: want a day", ttl)
	}
	if second := fence(); second != first+1 {
		t.Fatalf("second fence %d: want %d", second, first+1)
	}
	// Many acquisitions in a row run the counter ahead of the clock by
	// one each; an expired counter still comes back above it.
	if err := raw.HSet(ctx, ks.Meta, "f", first+1000).Err(); err != nil {
		t.Fatal(err)
	}
	if f := fence(); f != first+1001 {
		t.Fatalf("fence after the counter moved to %d: %d", first+1000, f)
	}
	if err := raw.Del(ctx, ks.Meta).Err(); err != nil { // as if it expired
		t.Fatal(err)
	}
	if f := fence(); f <= first+1001 {
		t.Fatalf("fence after the counter expired: %d, not above %d", f, first+1001)
	}
}
