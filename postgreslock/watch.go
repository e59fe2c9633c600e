package postgreslock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// watchWindow is how long a watcher's registration lasts; it is renewed
// at a third of that.
const watchWindow = 30 * time.Second

// Watch returns a channel that receives a value once the watch is in
// place, and then after each acquisition or release of key's lock. See
// [driver.Watcher]. The watch registers itself in the waiters table, so
// that acquisitions and releases of the key send a NOTIFY, and listens
// on the Locker's LISTEN session. A lease that runs out unrenewed is not
// announced.
func (l *Locker) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if err := driver.CheckKey(key); err != nil {
		return nil, driver.Wrap("watch", key, err)
	}
	if l.tables.Locks.Closed() {
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	if l.beforeWatchStart != nil {
		l.beforeWatchStart()
	}
	name := l.nameOf(driver.HoldLock, key)
	out := make(chan struct{}, 1)
	in := make(chan struct{}, 1)
	up := make(chan struct{}, 1)
	id := l.waiterID()
	stop := l.ln.watch(name, in, up)
	started := l.spawn(func() {
		defer close(out)
		defer stop()
		defer func() {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			l.pool.Exec(c, l.sql.leave, name, id, "")
			cancel()
		}()
		register := func() bool {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := l.pool.Exec(c, l.sql.watch, name, id, watchWindow.Milliseconds())
			return err == nil
		}
		registered := register()
		// in place once registered and listening, or given up for now
		select {
		case <-up:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return
		case <-l.ctx.Done():
			return
		}
		send(out)
		t := time.NewTicker(watchWindow / 3)
		defer t.Stop()
		if !registered {
			t.Reset(time.Second)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.ctx.Done():
				return
			case <-in:
				send(out)
			case <-t.C:
				if register() {
					t.Reset(watchWindow / 3)
				}
			}
		}
	})
	if !started {
		stop()
		return nil, driver.Wrap("watch", key, dlock.ErrClosed)
	}
	return out, nil
}
