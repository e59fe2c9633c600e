package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	a, err := New(s.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := New(s.Client(t))
	defer b.Close()
	lk, err := a.TryLock(ctx, "k", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(lk.Fence(), lk.Token())
	_, err = b.TryLock(ctx, "k")
	t.Log(err)
	done := make(chan error)
	go func() {
		lk2, err := b.Lock(ctx, "k", dlock.WithRetry(dlock.FixedInterval(10*time.Second)))
		if err == nil {
			t.Log("b got", lk2.Fence())
			err = lk2.Unlock(ctx)
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Log("handoff", time.Since(start))
	t.Log(lk.Unlock(ctx))
}
