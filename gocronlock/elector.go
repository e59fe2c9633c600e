package gocronlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/election"
	"github.com/go-co-op/gocron/v2"
)

// ErrNotLeader is IsLeader's answer on a scheduler whose process does not
// lead: gocron skips the run.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// Elector is a gocron.Elector over an election: it campaigns in the
// background from NewElector to Close, again after each loss, and says
// whether it leads now. Create it with NewElector.
type Elector struct {
	e     *election.Election
	value string

	cur    atomic.Pointer[election.Leadership] // while it leads
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

var _ gocron.Elector = (*Elector)(nil)

// resignTimeout bounds Close's resignation.
const resignTimeout = 5 * time.Second

// NewElector starts campaigning in e with value (what observers of the
// election read: a host name, an address) and returns the Elector. Its
// goroutine campaigns until elected, leads until the leadership ends,
// and campaigns again, until Close; a campaign that fails (the store is
// out of reach) is tried again after a pause that doubles up to 5s.
func NewElector(e *election.Election, value string) *Elector {
	ctx, cancel := context.WithCancel(context.Background())
	el := &Elector{e: e, value: value, cancel: cancel, done: make(chan struct{})}
	go el.campaign(ctx)
	return el
}

func (el *Elector) campaign(ctx context.Context) {
	defer close(el.done)
	pause := time.Duration(0)
	for ctx.Err() == nil {
		ld, err := el.e.Campaign(ctx, el.value)
		if err != nil {
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		pause = 0
		el.cur.Store(ld)
		select {
		case <-ld.Done():
			el.cur.Store(nil) // lost: campaign again
		case <-ctx.Done():
			el.cur.Store(nil)
			rctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			ld.Resign(rctx)
			cancel()
		}
	}
}

// IsLeader returns nil while this Elector leads its election, else
// ErrNotLeader. It asks nobody: the leadership ends the moment its lock
// is lost (see election.Leadership), and IsLeader says so from then on.
func (el *Elector) IsLeader(context.Context) error {
	if ld := el.cur.Load(); ld != nil && ld.Err() == nil {
		return nil
	}
	return ErrNotLeader
}

// Leadership returns the current term, or nil when the Elector does not
// lead: for its epoch, to fence the writes of the jobs.
func (el *Elector) Leadership() *election.Leadership {
	if ld := el.cur.Load(); ld != nil && ld.Err() == nil {
		return ld
	}
	return nil
}

// Close stops campaigning, resigns when it leads, and waits for its
// goroutine. Call it after the scheduler's Shutdown, so that no job runs
// after the resignation.
func (el *Elector) Close() error {
	el.once.Do(el.cancel)
	<-el.done
	return nil
}
