package faults

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// write is one write the fenced store received.
type write struct {
	Hold     string // the writing hold: "<worker>.<incarnation>.<seq>"
	Fence    uint64
	At       int64 // when the store decided, CLOCK_MONOTONIC
	Accepted bool
}

// store is the fenced store: it accepts a write whose fence is at least
// the highest it accepted, refuses a lower one, and records every write.
// It also keeps which workers say they hold the lock, for the schedule to
// pick a holder to pause or kill.
type store struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	highest uint64
	writes  []write
	holding map[int]bool // worker -> says it holds
}

func startStore() (*store, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &store{url: "http://" + ln.Addr().String(), holding: map[int]bool{}}
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
	s.mu.Lock()
	ok := fence >= s.highest
	if ok {
		s.highest = fence
	}
	s.writes = append(s.writes, write{Hold: r.FormValue("hold"), Fence: fence, At: now(), Accepted: ok})
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusConflict)
	}
}

func (s *store) setHolding(w http.ResponseWriter, r *http.Request) {
	worker, err := strconv.Atoi(r.FormValue("worker"))
	if err != nil {
		http.Error(w, "bad worker", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.holding[worker] = r.FormValue("held") == "1"
	s.mu.Unlock()
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

func (s *store) forget(worker int) {
	s.mu.Lock()
	delete(s.holding, worker)
	s.mu.Unlock()
}

func (s *store) history() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

func (s *store) String() string { return fmt.Sprintf("fenced store at %s", s.url) }
