package redislock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/redis/go-redis/v9"
)

// releaseFault is a go-redis hook that, once armed, fails every release:
// after it ran, its reply lost (ran), or before it left. It counts the
// renewals sent after the first release it failed.
type releaseFault struct {
	ran      bool
	armed    atomic.Bool
	released atomic.Bool  // a release was failed
	late     atomic.Int64 // renewals sent after that
}

func (h *releaseFault) fail(ctx context.Context, cmd redis.Cmder, next func() error) error {
	switch {
	case renews(cmd) || refreshScript.Runs(cmd):
		if h.released.Load() {
			h.late.Add(1)
		}
	case h.armed.Load() && releaseScript.Runs(cmd):
		h.released.Store(true)
		if h.ran {
			next()
		}
		err := errors.New("i/o timeout (injected: the release's reply is lost)")
		cmd.SetErr(err)
		return err
	}
	return next()
}

func (h *releaseFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *releaseFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.fail(ctx, cmd, func() error { return next(ctx, cmd) })
	}
}

func (h *releaseFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var failed []redis.Cmder
		for _, cmd := range cmds {
			h.fail(ctx, cmd, func() error { return nil })
			if cmd.Err() != nil {
				failed = append(failed, cmd)
			}
		}
		err := next(ctx, cmds) // the replies of a pipeline come together
		for _, cmd := range failed {
			cmd.SetErr(errors.New("i/o timeout (injected: the release's reply is lost)"))
		}
		return err
	}
}

// A release whose outcome is unknown (its reply lost after it ran, or it
// never left) stops the renewals, whether it came from Unlock, from
// dlock.Guard's release or from dlock.Do, which do not retry it: no
// renewal is sent after it, the key lapses within its TTL, and the handle
// ends as released (not lost) at its deadline.
func TestReleaseOfUnknownOutcomeLapses(t *testing.T) {
	t.Parallel()            // each case on a client and key of its own, waiting on its lease
	const ttl = time.Second // renewals every 333ms: room for a loaded machine
	for _, fault := range []struct {
		name string
		ran  bool
	}{{"reply lost", true}, {"never sent", false}} {
		for _, via := range []string{"Unlock", "Guard", "Do"} {
			t.Run(fault.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				h := &releaseFault{ran: fault.ran}
				l := lockerWith(t, h, dlock.WithTTL(ttl))
				key := keyFor(t)
				var lk dlock.Lock
				var err error
				switch via {
				case "Unlock", "Guard":
					if lk, err = l.TryLock(ctx, key); err != nil {
						t.Fatal(err)
					}
					h.armed.Store(true)
					if via == "Unlock" {
						err = lk.Unlock(ctx)
					} else {
						_, release := dlock.Guard(ctx, lk)
						err = release()
					}
				case "Do":
					err = dlock.Do(ctx, l, key, func(ctx context.Context) error {
						lk, _ = dlock.LockFrom(ctx)
						h.armed.Store(true)
						return nil
					})
				}
				if err == nil || errors.Is(err, dlock.ErrLockLost) {
					t.Fatalf("%s whose release failed = %v, want the release's error", via, err)
				}
				if pttl := shared.Client(t).PTTL(ctx, "dlock:lock:"+key).Val(); pttl > ttl {
					t.Fatalf("PTTL %v after the failed release, want at most the TTL, %v", pttl, ttl)
				}
				within(t, lk.Done(), 10*ttl, "Done of a hold whose release failed")
				if errors.Is(lk.Err(), dlock.ErrLockLost) || !errors.Is(lk.Err(), dlock.ErrNotHeld) {
					t.Fatalf("Err = %v, want a release (ErrNotHeld), not a loss", lk.Err())
				}
				raw := shared.Client(t)
				dlocktest.Eventually(t, 10*ttl, "the key lapses", func() bool { return raw.Exists(ctx, "dlock:lock:"+key).Val() == 0 })
				if n := h.late.Load(); n != 0 {
					t.Errorf("%d renewals sent after the release, want none", n)
				}
			})
		}
	}
}
