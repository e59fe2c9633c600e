package rediswait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// script is a Waiter whose attempts and wake-ups come to the outcomes it
// is given, in turn, and which counts its calls.
type script struct {
	attempts []Outcome // the outcome of each attempt; past the end: busy
	woken    Outcome   // the outcome of every wake-up
	settling chan struct{}
	calls    struct{ attempt, woken, leave, settling int }
	early    int          // attempts made while settling
	checked  atomic.Int32 // Settling calls while settling
}

func (s *script) Attempt(_ context.Context, delay time.Duration) Outcome {
	if s.settling != nil {
		s.early++
	}
	s.calls.attempt++
	if s.calls.attempt <= len(s.attempts) {
		return s.attempts[s.calls.attempt-1]
	}
	return Outcome{Sleep: delay}
}

func (s *script) Woken(context.Context, Wake) Outcome { s.calls.woken++; return s.woken }
func (s *script) Leave(context.Context)               { s.calls.leave++ }

func (s *script) Settling() <-chan struct{} {
	if s.settling == nil {
		return nil
	}
	select {
	case <-s.settling:
		s.settling = nil
	default:
		s.checked.Add(1)
	}
	return s.settling
}

var fixed = dlock.RetryStrategy{Initial: time.Millisecond, Max: time.Millisecond, Factor: 1}

func TestLineHeld(t *testing.T) {
	s := &script{attempts: []Outcome{{Sleep: time.Millisecond}, {Held: true}}}
	ln := Line{Key: "k", Retry: fixed}
	if err := ln.Wait(context.Background(), s); err != nil {
		t.Fatalf("Wait: %v, want the lock", err)
	}
	if s.calls.attempt != 2 || s.calls.leave != 0 {
		t.Fatalf("attempts %d, leaves %d; want 2 and 0", s.calls.attempt, s.calls.leave)
	}
}

// A wait that runs out leaves the queue and says the last attempt's
// failure, so that a server out of reach is not taken for a busy lock.
func TestLineRunsOut(t *testing.T) {
	down := errors.New("server out of reach")
	s := &script{attempts: []Outcome{{Err: down, Sleep: time.Hour}}}
	ln := Line{Key: "k", Retry: fixed, End: time.Now().Add(50 * time.Millisecond)}
	err := ln.Wait(context.Background(), s)
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, down) {
		t.Fatalf("Wait: %v, want busy with the attempt's failure", err)
	}
	if s.calls.leave != 1 {
		t.Fatalf("%d leaves, want 1", s.calls.leave)
	}
	var na *dlock.NotAcquiredError
	if !errors.As(err, &na) || na.Key != "k" {
		t.Fatalf("Wait: %#v, want a *dlock.NotAcquiredError for k", err)
	}
}

// No attempt begins after the limit.
func TestLineNoAttemptAfterTheLimit(t *testing.T) {
	s := &script{}
	ln := Line{Key: "k", Retry: fixed, End: time.Now().Add(-time.Second)}
	if err := ln.Wait(context.Background(), s); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait: %v, want busy", err)
	}
	if s.calls.attempt != 0 || s.calls.leave != 1 {
		t.Fatalf("attempts %d, leaves %d; want 0 and 1", s.calls.attempt, s.calls.leave)
	}
}

// A fatal failure ends the wait with its own error; the attempt left the
// queue itself.
func TestLineFatal(t *testing.T) {
	denied := errors.New("NOPERM")
	s := &script{attempts: []Outcome{{Err: denied, Fatal: true}}}
	ln := Line{Key: "k", Retry: fixed}
	if err := ln.Wait(context.Background(), s); err != denied {
		t.Fatalf("Wait: %v, want %v", err, denied)
	}
	if s.calls.leave != 0 {
		t.Fatalf("%d leaves, want 0", s.calls.leave)
	}
}

func TestLineCancelAndClose(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &script{}
	ln := Line{Key: "k", Retry: fixed, First: time.Hour}
	if err := ln.Wait(ctx, s); !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v, want busy and canceled", err)
	}
	quit := make(chan struct{})
	close(quit)
	s2 := &script{}
	ln = Line{Key: "k", Retry: fixed, First: time.Hour, Quit: quit}
	if err := ln.Wait(context.Background(), s2); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Wait on a closed Locker: %v, want ErrClosed", err)
	}
	if s.calls.leave != 1 || s2.calls.leave != 1 || s.calls.attempt+s2.calls.attempt != 0 {
		t.Fatalf("leaves %d and %d, attempts %d; want 1, 1 and 0", s.calls.leave, s2.calls.leave, s.calls.attempt+s2.calls.attempt)
	}
}

// A wake-up that hands the lock over ends the wait; one that asks for an
// attempt gets one at once.
func TestLineWoken(t *testing.T) {
	wake := make(chan Wake, 1)
	s := &script{woken: Outcome{Again: true}, attempts: []Outcome{{Held: true}}}
	ln := Line{Key: "k", Retry: fixed, First: time.Hour, Wake: wake}
	wake <- Wake{}
	if err := ln.Wait(context.Background(), s); err != nil {
		t.Fatalf("Wait: %v, want the lock", err)
	}
	if s.calls.woken != 1 || s.calls.attempt != 1 {
		t.Fatalf("wake-ups %d, attempts %d; want 1 and 1", s.calls.woken, s.calls.attempt)
	}
	wake <- Wake{}
	s = &script{woken: Outcome{Held: true}}
	ln = Line{Key: "k", Retry: fixed, First: time.Hour, Wake: wake}
	if err := ln.Wait(context.Background(), s); err != nil || s.calls.attempt != 0 {
		t.Fatalf("Wait: %v after %d attempts, want the lock by the wake-up alone", err, s.calls.attempt)
	}
}

// While settling, a waiter does not attempt, and does not spin either: the
// loop sleeps its retry delay between its looks, then attempts once the
// request it left ended.
func TestLineSettling(t *testing.T) {
	settled := make(chan struct{})
	slow := dlock.RetryStrategy{Initial: 20 * time.Millisecond, Max: 20 * time.Millisecond, Factor: 1}
	s := &script{settling: settled, attempts: []Outcome{{Held: true}}}
	ln := Line{Key: "k", Retry: slow}
	done := make(chan error, 1)
	begin := time.Now()
	go func() { done <- ln.Wait(context.Background(), s) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.checked.Load() < 5 { // the loop looked five times: it slept twice between looks (two looks a turn)
		if time.Now().After(deadline) {
			t.Fatal("the loop did not look at its settling five times in 10s")
		}
		time.Sleep(time.Millisecond) // poll interval, bounded by deadline
	}
	if took := time.Since(begin); took < 2*slow.Max {
		t.Fatalf("five looks at settling in %v: the loop spins (want a retry delay, %v, between looks)", took, slow.Max)
	}
	close(settled)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v, want the lock", err)
	}
	if s.early != 0 || s.calls.attempt != 1 {
		t.Fatalf("%d attempts while settling, %d in all; want 0 and 1", s.early, s.calls.attempt)
	}
}
