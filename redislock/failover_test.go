package redislock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The README's failover figures come from this test with more rounds:
//
//	go test ./redislock -run TestFailoverFigures -failover.rounds=50 -v -timeout 60m
var (
	failoverRounds = flag.Int("failover.rounds", 1, "TestFailoverFigures: rounds of each fault, with and without replica acknowledgement")
	failoverTTL    = flag.Duration("failover.ttl", time.Second, "TestFailoverFigures: the lease of the locks")
)

// fault is one way a Sentinel group loses its master: a forced failover
// (SENTINEL FAILOVER, the old master taking writes until it is demoted) or
// a kill (SIGKILL, just after the holder's acquisition returned).
type fault string

const (
	forcedFailover fault = "forced failover"
	masterKill     fault = "master killed"
)

// round is what one round saw.
type round struct {
	twice bool          // the contender acquired while the holder's handle still said held
	late  time.Duration // then: how long after, the holder's Done closed
	err   error         // the round could not be run to the end
}

// Through failovers and master kills, a lock held with WithReplicaAck(1,
// ...) on a master with one replica is never granted twice: the contender
// acquires only after the holder's Done closed. Without it, the test
// counts how often it is, and prints both, as the README shows them.
func TestFailoverFigures(t *testing.T) {
	t.Parallel() // its own servers; it waits on failovers and leases, not on the CPU
	ack := WithReplicaAck(1, 250*time.Millisecond)
	modes := []struct {
		name string
		opts []dlock.Option
	}{{"without acknowledgement", nil}, {"WithReplicaAck(1, 250ms)", []dlock.Option{ack}}}
	results := make([]map[fault][]round, len(modes))
	var wg sync.WaitGroup
	for i, m := range modes {
		g := redistest.StartSentinel(t, 1, 3) // a group per mode: the modes run at once
		wg.Go(func() {
			results[i] = map[fault][]round{}
			for r := 0; r < *failoverRounds; r++ {
				for _, f := range []fault{forcedFailover, masterKill} {
					results[i][f] = append(results[i][f], failoverRound(t, g, f, m.opts))
				}
			}
		})
	}
	wg.Wait()

	var table strings.Builder
	fmt.Fprintf(&table, "| fault | mode | rounds | granted twice | holder's Done after the new grant (max) | rounds not run |\n|---|---|---|---|---|---|\n")
	for i, m := range modes {
		for _, f := range []fault{forcedFailover, masterKill} {
			rs := results[i][f]
			var twice, failed int
			var late []time.Duration
			for _, r := range rs {
				switch {
				case r.err != nil:
					failed++
					t.Logf("%s, %s: %v", f, m.name, r.err)
				case r.twice:
					twice++
					late = append(late, r.late)
				}
			}
			worst := "—"
			if len(late) > 0 {
				worst = slices.Max(late).Round(100 * time.Microsecond).String()
			}
			fmt.Fprintf(&table, "| %s | %s | %d | %d | %s | %d |\n", f, m.name, len(rs)-failed, twice, worst, failed)
			if m.opts != nil && twice > 0 {
				t.Errorf("%s with replica acknowledgement: the lock was granted twice in %d of %d rounds", f, twice, len(rs)-failed)
			}
			if failed > len(rs)/5 {
				t.Errorf("%s, %s: %d of %d rounds could not be run", f, m.name, failed, len(rs))
			}
		}
	}
	t.Logf("lease %v, one master and one replica, three Sentinels (down after 500ms):\n%s", *failoverTTL, table.String())
}

// failoverRound runs one round on g: a holder takes a key, f strikes the
// master, and a contender on a client of its own tries the key every 2ms
// until it gets it. It restores g before it returns.
func failoverRound(t *testing.T, g *redistest.SentinelGroup, f fault, opts []dlock.Option) (r round) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts = append([]dlock.Option{dlock.WithTTL(*failoverTTL)}, opts...)
	party := func() (*Locker, func(), error) {
		c := redis.NewFailoverClient(g.FailoverOptions())
		l, err := New(c, opts...)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return l, func() { l.Orphan(); c.Close() }, nil
	}
	holder, stop, err := party()
	if err != nil {
		return round{err: err}
	}
	defer stop()
	contender, stop, err := party()
	if err != nil {
		return round{err: err}
	}
	defer stop()
	key := keyFor(t)

	var lk dlock.Lock
	err = poll(ctx, func() error { // the group may still be settling from the last round
		lk, err = holder.TryLock(ctx, key)
		return err
	})
	if err != nil {
		return round{err: fmt.Errorf("the holder's acquisition: %w", err)}
	}
	var killed *redistest.Server
	switch f {
	case forcedFailover:
		_, err = g.Failover(ctx)
	case masterKill:
		killed, err = g.Master(ctx)
		if err == nil {
			killed.Kill()
		}
	}
	if err != nil {
		return round{err: err}
	}
	restored := make(chan error, 1)
	settled := make(chan struct{}) // closed when the group is whole again
	go func() {
		defer close(settled)
		if killed != nil {
			if _, err := g.Promoted(ctx, killed); err != nil {
				restored <- err
				return
			}
			restored <- g.Rejoin(ctx, killed)
		} else {
			restored <- g.Settle(ctx)
		}
	}()
	defer func() {
		if err := <-restored; err != nil && r.err == nil {
			r.err = fmt.Errorf("restoring the group: %w", err)
		}
	}()
	// A holder whose lock came through (its key on the new master, which
	// its renewals reach) keeps it, and nobody is granted it twice: once
	// the group is whole again and the holder kept the lock three leases
	// more, it lets go, and the contender gets the key after its Done
	// closed.
	go func() {
		select {
		case <-settled:
		case <-ctx.Done():
			return
		}
		select {
		case <-lk.Done():
		case <-time.After(3 * *failoverTTL):
			lk.Unlock(ctx)
		case <-ctx.Done():
		}
	}()

	// The contender tries until it holds the key.
	var got dlock.Lock
	err = poll(ctx, func() error {
		got, err = contender.TryLock(ctx, key)
		return err
	})
	if err != nil {
		return round{err: fmt.Errorf("the contender never acquired: %w", err)}
	}
	acquired := time.Now()
	defer got.Unlock(ctx)
	select {
	case <-lk.Done():
		return round{}
	default:
	}
	select {
	case <-lk.Done():
		return round{twice: true, late: time.Since(acquired)}
	case <-time.After(*failoverTTL + 5*time.Second):
		return round{twice: true, late: time.Since(acquired)}
	}
}

// poll calls try every 2ms until it returns nil or ctx ends; it returns
// try's last error then.
func poll(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		if errors.Is(err, dlock.ErrClosed) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Millisecond): // the contender's pace, bounded by ctx
		}
	}
}
