// Command orders is an order-payment service that pays each order at most
// once at a time, across every replica that shares a Redis: it serves
//
//	POST /orders/{orderId}/pay
//
// behind httplock.New(locker, "order:{orderId}"). A second payment of an
// order that is being paid gets 409 Conflict with Retry-After.
//
// Without flags it runs a demonstration: it starts its own redis-server
// (which must be on PATH), sends two concurrent payments of order 42, and
// prints one 200 and one 409. With -listen it serves until interrupted:
//
//	go run ./examples/orders                      # the demonstration
//	go run ./examples/orders -listen 127.0.0.1:8080 -redis 127.0.0.1:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/httplock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("orders: ")
	listen := flag.String("listen", "", "serve on this address until interrupted, instead of the demonstration")
	addr := flag.String("redis", "", "Redis address (default: start a redis-server of its own)")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *listen, *addr, os.Stdout)
	stop()
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, addr string, out io.Writer) error {
	if addr == "" {
		dir, err := os.MkdirTemp("", "orders-redis-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		srv, err := redistest.New(dir, redistest.Config{})
		if err != nil {
			return err
		}
		defer srv.Close()
		addr = srv.Addr()
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	// Fenced: the handler passes its fence to the database with the write.
	locker, err := redislock.New(client, dlock.WithFencing(true))
	if err != nil {
		return err
	}
	defer locker.Close()

	if listen == "" {
		return demo(ctx, locker, out)
	}
	pay := func(ctx context.Context, order string) error { // a payment provider that takes 2s
		select {
		case <-time.After(2 * time.Second):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	h, err := newService(locker, pay)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(out, "serving POST /orders/{orderId}/pay on %s\n", listen)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// service pays orders. Its ledger stands for the database: it records the
// fence of each payment and refuses a payment whose fence is older than
// the last one it saw, so that a request that lost its lock mid-way cannot
// overwrite a newer payment.
type service struct {
	charge func(ctx context.Context, order string) error

	mu     sync.Mutex
	ledger map[string]uint64 // order -> fence of its last payment
}

// newService returns the service's routes, with each payment holding the
// lock of its order.
func newService(locker dlock.Locker, charge func(context.Context, string) error) (http.Handler, error) {
	lock, err := httplock.New(locker, "order:{orderId}")
	if err != nil {
		return nil, err
	}
	s := &service{charge: charge, ledger: make(map[string]uint64)}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", lock(http.HandlerFunc(s.pay)))
	return mux, nil
}

func (s *service) pay(w http.ResponseWriter, r *http.Request) {
	order := r.PathValue("orderId")
	lk, _ := dlock.LockFrom(r.Context())
	if err := s.charge(r.Context(), order); err != nil {
		http.Error(w, "payment failed", http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if lk.Fence() < s.ledger[order] {
		http.Error(w, "stale lock: a newer payment was recorded", http.StatusConflict)
		return
	}
	s.ledger[order] = lk.Fence()
	fmt.Fprintf(w, "paid order %s (fence %d)\n", order, lk.Fence())
}

// demo serves the service on a loopback port and sends two concurrent
// payments of order 42. The payment provider holds the first payment until
// the second has its answer, so the two always overlap.
func demo(ctx context.Context, locker dlock.Locker, out io.Writer) error {
	entered := make(chan struct{}, 1)
	answered := make(chan struct{})
	charge := func(ctx context.Context, order string) error {
		entered <- struct{}{}
		select {
		case <-answered:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	h, err := newService(locker, charge)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := "http://" + ln.Addr().String() + "/orders/42/pay"
	type result struct {
		status int
		line   string
	}
	results := make(chan result, 2)
	send := func() {
		line, status, err := post(ctx, url)
		if err != nil {
			line = err.Error()
		}
		results <- result{status, "POST /orders/42/pay: " + line}
	}
	go send()
	select { // the first payment holds the lock once the provider sees it
	case <-entered:
	case <-ctx.Done():
		return ctx.Err()
	}
	go send()
	var got []result
	for len(got) < 2 {
		select {
		case r := <-results:
			got = append(got, r)
			if len(got) == 1 {
				close(answered) // the second has its answer: let the first finish
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].status < got[j].status })
	for _, r := range got {
		fmt.Fprintln(out, r.line)
	}
	if got[0].status != http.StatusOK || got[1].status != http.StatusConflict {
		return errors.New("expected one 200 and one 409")
	}
	return nil
}

// post sends an empty POST and describes the answer in one line.
func post(ctx context.Context, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, err
	}
	line := resp.Status
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		line += " (Retry-After: " + ra + ")"
	}
	text := strings.TrimSpace(string(body))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		text = detail(body)
	}
	return line + ": " + text, resp.StatusCode, nil
}
