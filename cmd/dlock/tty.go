package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Timing of the status line shown while waiting on a terminal.
const (
	statusDelay  = 300 * time.Millisecond // none for a lock that comes at once
	statusPeriod = 250 * time.Millisecond
)

// showWaiting keeps a one-line status on the terminal w while dlock waits
// for key: the holder's remaining lease and the time waited. The returned
// function erases the line and stops the goroutine.
func showWaiting(ctx context.Context, w *os.File, be backend, kind dlock.Kind, key string, start time.Time) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(statusDelay)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-quit:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-ctx.Done():
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
			}
			holder := "holder unknown"
			ictx, cancel := context.WithTimeout(ctx, time.Second)
			info, err := inspectKind(ictx, be, kind, key)
			cancel()
			switch {
			case err != nil:
			case kind == dlock.KindSemaphore && info.Held:
				holder = fmt.Sprintf("%d of %d permits out, longest lease %v", info.Holds, info.Limit, info.TTL.Round(100*time.Millisecond))
			case kind == dlock.KindRWLock && info.Held:
				holder = holdsString(info) + ", longest lease " + info.TTL.Round(100*time.Millisecond).String()
			case !info.Held:
				holder = "just released"
			case info.TTL < 0:
				holder = "held with no expiry"
			default:
				holder = "holder's lease " + info.TTL.Round(100*time.Millisecond).String()
				if info.Owner != "" {
					holder = "owner " + info.Owner + ", lease " + info.TTL.Round(100*time.Millisecond).String()
				}
			}
			fmt.Fprintf(w, "\r\033[Kdlock: waiting for %q (%s), waited %v", key, holder, time.Since(start).Round(time.Second))
			shown = true
			t.Reset(statusPeriod)
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}
