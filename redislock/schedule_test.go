package redislock

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// The watchdog declares a lease lost exactly at its local deadline, by its
// own clock, and not a moment before: on fake time, with leases that it
// does not renew, so that no command is sent.
func TestWatchdogDeadlineSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
		defer c.Close()
		l, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start := time.Now()
		var locks []*hold
		for i, ttl := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second} { // in deadline order
			k, err := redisnode.Of("dlock", "k"+string(rune('a'+i)))
			if err != nil {
				t.Fatal(err)
			}
			lk := l.newLock(driver.HoldLock, "k", k, driver.NewToken(), "", false, ttl)
			lk.setDeadline(start, ttl)
			if _, err := l.acquired(context.Background(), lk); err != nil {
				t.Fatal(err)
			}
			locks = append(locks, lk)
		}
		for _, lk := range locks {
			synctest.Wait()
			if lk.Err() != nil {
				t.Fatalf("lease of %v ended early, at %v", lk.ttl, time.Since(start))
			}
			want := lk.ttl - redisnode.Drift.Of(lk.ttl)
			time.Sleep(time.Until(start.Add(want)) - time.Nanosecond)
			synctest.Wait()
			if lk.Err() != nil {
				t.Fatalf("lease of %v lost at %v, before its deadline %v", lk.ttl, time.Since(start), want)
			}
			<-lk.Done()
			if got := time.Since(start); got != want {
				t.Errorf("lease of %v lost at %v, want its deadline %v", lk.ttl, got, want)
			}
			if !errors.Is(lk.Err(), dlock.ErrLeaseExpired) {
				t.Errorf("Err = %v, want ErrLeaseExpired", lk.Err())
			}
		}
	})
}
