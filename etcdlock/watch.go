package etcdlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.Watcher = (*Locker)(nil)

// Watch tells when key's lock may have changed hands: see [driver.Watcher].
// It is an etcd watch on the key's range: every hold written or deleted
// (by a release, ForceUnlock, or its lease running out) is a change. When
// the watch breaks (a compaction, a member without a leader, a lost
// connection) it is made again, and the channel receives a value once it
// is in place, for changes may have been missed meanwhile.
//
// Each Watch has one goroutine, stopped when ctx ends or the Locker
// closes.
func (l *Locker) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if err := driver.CheckKey(key); err != nil {
		return nil, driver.Wrap("watch", key, err)
	}
	// Counted under l.mu, where Close closes the table before it waits.
	l.mu.Lock()
	if l.tables.Locks.Closed() {
		l.mu.Unlock()
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	l.wg.Add(1)
	l.mu.Unlock()
	out := make(chan struct{}, 1)
	go func() {
		defer l.wg.Done()
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(l.ctx, cancel)()
		l.watchRange(ctx, l.rangeOf(key), out)
	}()
	return out, nil
}

// watchRange watches the range p until ctx ends, making the watch again
// after a pause that doubles up to a second while it keeps breaking.
func (l *Locker) watchRange(ctx context.Context, p string, out chan<- struct{}) {
	pause := time.Duration(0)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		wch := l.cli.Watch(clientv3.WithRequireLeader(wctx), p, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		for resp := range wch {
			if resp.Canceled || resp.Err() != nil {
				break
			}
			if resp.Created {
				pause = 0
			}
			tell(out) // in place, or a change
		}
		cancel()
		pause = min(max(2*pause, 10*time.Millisecond), time.Second)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// tell sends on a channel of capacity one without blocking: a value not
// yet received stands for this one too.
func tell(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}
