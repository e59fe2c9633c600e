package pgtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pause stops every process of the server, also while clients keep
// connecting (each connection is a process the postmaster starts), and
// Resume lets them all go on.
func TestPauseStopsEveryProcess(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 { // clients that connect again and again meanwhile
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				if c, err := pgx.Connect(cctx, s.URL("")); err == nil {
					c.Close(cctx)
				}
				ccancel()
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	for round := range 5 {
		s.Pause()
		pid := s.Pid()
		for _, p := range append(children(pid), pid) {
			if _, st, ok := procStat(p); ok && st != 'T' && st != 'Z' && st != 'X' {
				s.Resume()
				t.Fatalf("round %d: process %d of the server (postmaster %d) is in state %c after Pause; want stopped", round, p, pid, st)
			}
		}
		qctx, qcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := pgx.Connect(qctx, s.URL(""))
		qcancel()
		if err == nil {
			s.Resume()
			t.Fatalf("round %d: a connection was answered while the server was paused", round)
		}
		s.Resume()
		qctx, qcancel = context.WithTimeout(context.Background(), 30*time.Second)
		c, err := pgx.Connect(qctx, s.URL(""))
		if err != nil {
			qcancel()
			t.Fatalf("round %d: after Resume: %v", round, err)
		}
		c.Close(qctx)
		qcancel()
	}
}
