package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How a hold shares the keys it writes to, as the store and the checker
// see it.
const (
	exclusive = "x" // a lock, a write lock, a leadership: alone on the key
	shared    = "r" // a read lock: beside other readers, never beside an exclusive hold
	permit    = "p" // a semaphore's permit: at most the limit at once
)

// write is one write the fenced store received.
type write struct {
	Hold     string // the writing hold: "<worker>.<incarnation>.<seq>"
	Key      string
	Kind     string // exclusive, shared or permit
	Fence    uint64
	At       int64 // when the store decided, CLOCK_MONOTONIC
	Accepted bool
}

// store is the fenced store: it decides each write by its fence, as a
// storage guarded by the primitive would, and records every write. It also
// keeps which workers say they hold something, for the schedule to pick a
// holder to pause or kill.
type store struct {
	srv   *http.Server
	url   string
	limit int // a semaphore's permits

	mu      sync.Mutex
	keys    map[string]*keyState
	writes  []write
	holding map[int]bool  // worker -> says it holds
	entered int           // critical sections entered
	enter   chan struct{} // closed, and replaced, when one is entered
}

// keyState is what the store keeps of one key to decide its writes.
//
// An exclusive write is accepted when its fence is at least every fence
// accepted on the key: a later holder's write shuts out the earlier ones.
// A shared write is accepted when its fence is at least every exclusive
// fence accepted: readers pass one another, but a writer's write shuts
// out the readers before it.
//
// A permit's write takes one of limit slots, each a fence, until its hold
// says it is done: a slot it has, a free one, or, when all are taken and
// its fence is above the lowest of them, that one, whose later writes are
// then refused (a permit granted after it is proof that one of the leases
// in the slots ended, and the fences say which began first). A fence below
// every slot of a full store is refused. So the store never has more than
// limit writers at once, as long as no two holds share a fence.
type keyState struct {
	highest   uint64            // the highest fence accepted
	exclusive uint64            // the highest fence of an accepted exclusive write
	slots     map[uint64]string // permits: fence -> the hold that took the slot
	evicted   map[uint64]bool   // permits pushed out of their slot
}

func (k *keyState) accept(kind, hold string, fence uint64, limit int) bool {
	switch kind {
	case permit:
		if !k.admit(hold, fence, limit) {
			return false
		}
	case shared:
		if fence < k.exclusive {
			return false
		}
	default:
		if fence < k.highest {
			return false
		}
		k.exclusive = fence
	}
	k.highest = max(k.highest, fence)
	return true
}

func (k *keyState) admit(hold string, fence uint64, limit int) bool {
	if _, ok := k.slots[fence]; ok {
		return true
	}
	if k.evicted[fence] {
		return false
	}
	if len(k.slots) >= limit {
		lowest := fence
		for f := range k.slots {
			lowest = min(lowest, f)
		}
		if lowest == fence {
			return false
		}
		delete(k.slots, lowest)
		k.evicted[lowest] = true
	}
	k.slots[fence] = hold
	return true
}

// free gives back the slots of the holds that match.
func (k *keyState) free(match func(hold string) bool) {
	for f, h := range k.slots {
		if match(h) {
			delete(k.slots, f)
		}
	}
}

func startStore(limit int) (*store, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &store{url: "http://" + ln.Addr().String(), limit: limit, keys: map[string]*keyState{}, holding: map[int]bool{}, enter: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", s.write)
	mux.HandleFunc("POST /holding", s.setHolding)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *store) close() { s.srv.Close() }

func (s *store) write(w http.ResponseWriter, r *http.Request) {
	fence, err := strconv.ParseUint(r.FormValue("fence"), 10, 64)
	if err != nil {
		http.Error(w, "bad fence", http.StatusBadRequest)
		return
	}
	wr := write{Hold: r.FormValue("hold"), Key: r.FormValue("key"), Kind: r.FormValue("kind"), Fence: fence}
	s.mu.Lock()
	k := s.keys[wr.Key]
	if k == nil {
		k = &keyState{slots: map[uint64]string{}, evicted: map[uint64]bool{}}
		s.keys[wr.Key] = k
	}
	wr.Accepted = k.accept(wr.Kind, wr.Hold, fence, s.limit)
	wr.At = now()
	s.writes = append(s.writes, wr)
	s.mu.Unlock()
	if !wr.Accepted {
		w.WriteHeader(http.StatusConflict)
	}
}

// setHolding records that a worker holds something (held=1) or no longer
// does (held=0, which gives back the permits of its hold).
func (s *store) setHolding(w http.ResponseWriter, r *http.Request) {
	worker, err := strconv.Atoi(r.FormValue("worker"))
	if err != nil {
		http.Error(w, "bad worker", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding[worker] = r.FormValue("held") == "1"
	if s.holding[worker] {
		s.entered++
		close(s.enter)
		s.enter = make(chan struct{})
	}
	if hold := r.FormValue("hold"); !s.holding[worker] && hold != "" {
		s.free(func(h string) bool { return h == hold })
	}
}

// free gives back the permits of the holds that match. The caller holds
// s.mu.
func (s *store) free(match func(hold string) bool) {
	for _, k := range s.keys {
		k.free(match)
	}
}

// awaitSections waits until the workers have entered n critical
// sections, ctx ends or the deadline passes.
func (s *store) awaitSections(ctx context.Context, n int, deadline int64) {
	t := time.NewTimer(time.Duration(max(deadline-now(), 0)))
	defer t.Stop()
	for {
		s.mu.Lock()
		entered, enter := s.entered, s.enter
		s.mu.Unlock()
		if entered >= n {
			return
		}
		select {
		case <-enter:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// holder returns a worker that says it holds the lock, or -1.
func (s *store) holder() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w, held := range s.holding {
		if held {
			return w
		}
	}
	return -1
}

// forget drops what a killed worker said it held.
func (s *store) forget(worker int) {
	s.mu.Lock()
	delete(s.holding, worker)
	s.mu.Unlock()
}

// killed gives back the permits of a killed incarnation
// ("<worker>.<incarnation>"): it will not write again.
func (s *store) killed(incarnation string) {
	s.mu.Lock()
	s.free(func(h string) bool { return strings.HasPrefix(h, incarnation+".") })
	s.mu.Unlock()
}

func (s *store) history() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

func (s *store) String() string { return fmt.Sprintf("fenced store at %s", s.url) }
