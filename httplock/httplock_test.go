package httplock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/httplock"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/dlock-go/dlock/internal/syncbuf"
	"github.com/dlock-go/dlock/keytmpl"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// bound is how long a test waits for anything before it fails.
const bound = 20 * time.Second

// newLocker returns a Locker over a client of s, closed when t ends.
func newLocker(t *testing.T, c *redis.Client, opts ...dlock.Option) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(c, append([]dlock.Option{dlock.WithFencing(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// mustNew is httplock.New that fails t on error.
func mustNew(t *testing.T, l dlock.Locker, tmpl string, opts ...dlock.Option) func(http.Handler) http.Handler {
	t.Helper()
	return mustNewWith(t, httplock.Middleware{}, l, tmpl, opts...)
}

// mustNewWith is m.New that fails t on error.
func mustNewWith(t *testing.T, m httplock.Middleware, l dlock.Locker, tmpl string, opts ...dlock.Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := m.New(l, tmpl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// serve starts an HTTP server on loopback for h, closed when t ends. The
// server does not log the panics that tests cause on purpose.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status     int
	retryAfter string
	ctype      string
	body       []byte
	err        error
}

// problem decodes an RFC 9457 body.
func (a answer) problem(t *testing.T) map[string]any {
	t.Helper()
	if a.ctype != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json (body %s)", a.ctype, a.body)
	}
	var p map[string]any
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", a.body, err)
	}
	return p
}

func do(ctx context.Context, c *http.Client, method, url string, header http.Header) answer {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return answer{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body, err}
}

func post(t *testing.T, srv *httptest.Server, path string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	return do(ctx, srv.Client(), http.MethodPost, srv.URL+path, nil)
}

// gate is a handler that reports each request it enters and holds it until
// released (or until bound passes, when it answers 500).
type gate struct {
	entered chan *http.Request
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan *http.Request, 64), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- r
	select {
	case <-g.release:
		lk, _ := dlock.LockFrom(r.Context())
		fmt.Fprintf(w, "fence %d", lk.Fence())
	case <-time.After(bound):
		http.Error(w, "gate never released", http.StatusInternalServerError)
	}
}

func (g *gate) waitEntered(t *testing.T) *http.Request {
	t.Helper()
	select {
	case r := <-g.entered:
		return r
	case <-time.After(bound):
		t.Fatalf("no request entered the handler within %v", bound)
		return nil
	}
}

// waitGone waits until the Redis key is deleted.
func waitGone(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		n, err := c.Exists(context.Background(), key).Result()
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %v (err %v)", key, bound, err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval; the deadline bounds the wait
	}
}

func TestNewRejects(t *testing.T) {
	s := redistest.Start(t)
	l := newLocker(t, s.Client(t))
	for _, tc := range []struct {
		tmpl     string
		status   int
		opts     []dlock.Option
		want     error
		contains string
	}{
		{"order:{orderId", 0, nil, keytmpl.ErrSyntax, "at offset 6: unclosed '{'"},
		{"order:{}", 0, nil, keytmpl.ErrSyntax, "at offset 6: empty placeholder name"},
		{"order:}", 0, nil, keytmpl.ErrSyntax, "at offset 6: '}' without a matching '{'"},
		{"order:{cookie:sid}", 0, nil, keytmpl.ErrSyntax, `at offset 7: unknown source "cookie"`},
		{"{a}{b}", 0, nil, keytmpl.ErrSyntax, "without a separator"},
		{"{a}:{a}", 0, nil, keytmpl.ErrSyntax, "duplicate placeholder {a}"},
		{"k:{id}", 500, nil, dlock.ErrInvalidOption, "busy status 500"},
		{"k:{id}", 0, []dlock.Option{dlock.WithTTL(0)}, dlock.ErrInvalidTTL, "0s is below"},
		{"k:{id}", 0, []dlock.Option{dlock.WithWait(-time.Second)}, dlock.ErrInvalidOption, "negative wait"},
		{"k:{id}", 0, []dlock.Option{dlock.WithRetry(dlock.FixedInterval(0))}, dlock.ErrInvalidOption, "retry delays"},
		{"k:{id}", 0, []dlock.Option{dlock.WithPrefix("x")}, dlock.ErrInvalidOption, "WithPrefix"},
		{"k:{id}", 0, []dlock.Option{dlock.WithLease(0)}, dlock.ErrInvalidTTL, "below"},
	} {
		mw, err := httplock.Middleware{Status: tc.status}.New(l, tc.tmpl, tc.opts...)
		if mw != nil || !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.contains) {
			t.Errorf("New(%q) = %v, %v; want nil and an error matching %v containing %q", tc.tmpl, mw != nil, err, tc.want, tc.contains)
		}
	}
	if _, err := httplock.New(nil, "k:{id}"); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("New(nil locker): %v, want ErrNilClient", err)
	}
	if _, err := (httplock.Middleware{Status: http.StatusLocked}).New(l, "k:{id}", nil); err != nil {
		t.Errorf("New with 423 and a nil option: %v", err)
	}
}

// gatedOrders serves POST /orders/{orderId}/pay with a gate behind the lock
// "order:{orderId}", on a Redis server of its own.
func gatedOrders(t *testing.T) (*redistest.Server, *gate, *httptest.Server) {
	t.Helper()
	s := redistest.Start(t)
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", mustNew(t, newLocker(t, s.Client(t)), "order:{orderId}")(g))
	return s, g, serve(t, mux)
}

func TestConcurrentRequestsOneKey(t *testing.T) {
	const n = 8
	s, g, srv := gatedOrders(t)

	answers := make(chan answer, n)
	for range n {
		go func() { answers <- post(t, srv, "/orders/42/pay") }()
	}
	var got []answer
	for len(got) < n {
		select {
		case a := <-answers:
			got = append(got, a)
			if len(got) == n-1 {
				close(g.release) // every loser has its answer: let the winner finish
			}
		case <-time.After(bound):
			t.Fatalf("%d of %d answers after %v", len(got), n, bound)
		}
	}
	ok := 0
	for _, a := range got {
		switch {
		case a.err != nil:
			t.Errorf("request failed: %v", a.err)
		case a.status == http.StatusOK:
			ok++
		case a.status == http.StatusConflict:
			secs, err := strconv.Atoi(a.retryAfter)
			if err != nil || secs < 1 || secs > 10 {
				t.Errorf("409 with Retry-After %q, want whole seconds in [1, 10] (the holder's lease)", a.retryAfter)
			}
			p := a.problem(t)
			if p["status"] != float64(409) || p["title"] != "Conflict" || p["type"] != "about:blank" ||
				p["lockKeyTemplate"] != "order:{orderId}" || p["retryAfter"] != float64(secs) {
				t.Errorf("409 body %s", a.body)
			}
			if bytes.Contains(a.body, []byte("order:42")) {
				t.Errorf("409 body %s names the filled key", a.body)
			}
		default:
			t.Errorf("answer %d %s, want 200 or 409", a.status, a.body)
		}
	}
	if ok != 1 {
		t.Errorf("%d requests got 200, want exactly 1", ok)
	}
	waitGone(t, s.Client(t), "dlock:lock:order:42")
}

func TestDifferentKeysInParallel(t *testing.T) {
	const n = 4
	_, g, srv := gatedOrders(t)

	answers := make(chan answer, n)
	for i := range n {
		go func() { answers <- post(t, srv, fmt.Sprintf("/orders/%d/pay", i)) }()
	}
	for range n { // all n hold their locks at the same time
		g.waitEntered(t)
	}
	close(g.release)
	for range n {
		if a := <-answers; a.err != nil || a.status != http.StatusOK {
			t.Errorf("answer %d %s %v, want 200", a.status, a.body, a.err)
		}
	}
}

type reqName struct{}

// attempts reports each acquire attempt that a request named by the
// X-Req header makes, seen by a go-redis hook on the Locker's client.
type attempts struct{ seen chan string }

func (h *attempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *attempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *attempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name, ok := ctx.Value(reqName{}).(string); ok && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			select {
			case h.seen <- name:
			default:
			}
		}
		return err
	}
}

func TestWaitTurnsConflictIntoOK(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	hook := &attempts{seen: make(chan string, 64)}
	c.AddHook(hook)
	l := newLocker(t, c)
	g := newGate()
	name := func(h http.Handler) http.Handler { // tags the context for the hook
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reqName{}, r.Header.Get("X-Req"))))
		})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /now/{id}", name(mustNew(t, l, "order:{id}")(g)))
	mux.Handle("POST /wait/{id}", name(mustNew(t, l, "order:{id}",
		dlock.WithWait(bound), dlock.WithRetry(dlock.FixedInterval(50*time.Millisecond)))(g)))
	srv := serve(t, mux)
	send := func(path, req string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			ch <- do(ctx, srv.Client(), http.MethodPost, srv.URL+path, http.Header{"X-Req": {req}})
		}()
		return ch
	}

	first := send("/now/7", "A")
	g.waitEntered(t)
	if a := <-send("/now/7", "B"); a.status != http.StatusConflict {
		t.Fatalf("second request without wait: %d %s, want 409", a.status, a.body)
	}
	waiting := send("/wait/7", "C")
	for deadline := time.After(bound); ; { // C has tried once and is waiting
		select {
		case name := <-hook.seen:
			if name != "C" {
				continue
			}
		case <-deadline:
			t.Fatal("the waiting request made no attempt")
		}
		break
	}
	select {
	case a := <-waiting:
		t.Fatalf("waiting request answered %d %s while the lock was held", a.status, a.body)
	default:
	}
	g.release <- struct{}{} // A finishes; C gets the lock
	a := <-first
	if a.status != http.StatusOK {
		t.Fatalf("first request: %d %s %v", a.status, a.body, a.err)
	}
	var fa, fc uint64
	fmt.Sscanf(string(a.body), "fence %d", &fa)
	g.waitEntered(t)
	close(g.release)
	w := <-waiting
	if _, err := fmt.Sscanf(string(w.body), "fence %d", &fc); w.status != http.StatusOK || err != nil || fc <= fa {
		t.Fatalf("waiting request: %d %q %v, want 200 and a fence above the first's %d", w.status, w.body, w.err, fa)
	}
}

func TestReleasedOnPanic(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	l := newLocker(t, c)
	type boom struct{}
	var heldAtRecover int64 = -1
	recovered := make(chan any, 1)
	outer := func(h http.Handler) http.Handler { // what net/http would see
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					heldAtRecover = c.Exists(context.Background(), "dlock:lock:order:3").Val()
					recovered <- v
					panic(v)
				}
			}()
			h.ServeHTTP(w, r)
		})
	}
	var calls int
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", outer(mustNew(t, l, "order:{orderId}")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if calls++; calls == 1 {
				panic(boom{})
			}
			w.WriteHeader(http.StatusNoContent)
		}))))
	srv := serve(t, mux)

	if a := post(t, srv, "/orders/3/pay"); a.err == nil {
		t.Errorf("panicking handler answered %d; want the connection aborted by net/http", a.status)
	}
	select {
	case v := <-recovered:
		if _, ok := v.(boom); !ok {
			t.Fatalf("panic value %v, want boom{}", v)
		}
	case <-time.After(bound):
		t.Fatal("the panic did not reach the outer handler")
	}
	if heldAtRecover != 0 {
		t.Errorf("EXISTS of the lock key when the panic left the middleware = %d, want 0 (released)", heldAtRecover)
	}
	if a := post(t, srv, "/orders/3/pay"); a.status != http.StatusNoContent {
		t.Errorf("after the panic: %d %s %v, want 204", a.status, a.body, a.err)
	}
}

func TestReleasedOnClientDisconnect(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	l := newLocker(t, c)
	entered := make(chan struct{}, 1)
	causes := make(chan error, 1)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", mustNew(t, l, "order:{orderId}")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Quick") != "" {
				return
			}
			entered <- struct{}{}
			select {
			case <-r.Context().Done():
				causes <- context.Cause(r.Context())
			case <-time.After(bound):
				causes <- errors.New("request context never ended")
			}
		})))
	srv := serve(t, mux)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan answer, 1)
	go func() { gone <- do(ctx, srv.Client(), http.MethodPost, srv.URL+"/orders/5/pay", nil) }()
	select {
	case <-entered:
	case <-time.After(bound):
		t.Fatal("handler not entered")
	}
	if n := c.Exists(ctx, "dlock:lock:order:5").Val(); n != 1 {
		t.Fatalf("lock key missing while the handler runs (EXISTS = %d)", n)
	}
	cancel() // the client hangs up
	if a := <-gone; a.err == nil {
		t.Fatalf("cancelled request answered %d", a.status)
	}
	if err := <-causes; errors.Is(err, dlock.ErrLockLost) || err == nil {
		t.Fatalf("handler context ended with %v, want the client's cancellation", err)
	}
	waitGone(t, c, "dlock:lock:order:5")
	qctx, qcancel := context.WithTimeout(context.Background(), bound)
	defer qcancel()
	if a := do(qctx, srv.Client(), http.MethodPost, srv.URL+"/orders/5/pay", http.Header{"X-Quick": {"1"}}); a.status != http.StatusOK {
		t.Fatalf("after the disconnect: %d %s %v, want 200", a.status, a.body, a.err)
	}
}

func TestLostLockCancelsRequest(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(t)
	l := newLocker(t, c)
	var logs syncbuf.Buffer
	got := make(chan string, 2)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", mustNewWith(t, httplock.Middleware{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		l, "order:{orderId}", dlock.WithTTL(1500*time.Millisecond))(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			lk, ok := dlock.LockFrom(r.Context())
			if !ok || lk.Key() != "order:9" || lk.Fence() == 0 {
				got <- fmt.Sprintf("FromContext = %v, %v", lk, ok)
				return
			}
			// Someone deletes the key: the watchdog's next renewal finds
			// the lock gone.
			c.Del(r.Context(), "dlock:lock:order:9")
			select {
			case <-r.Context().Done():
				got <- fmt.Sprint(context.Cause(r.Context()))
				if !errors.Is(context.Cause(r.Context()), dlock.ErrLockLost) {
					return
				}
				got <- "lost"
			case <-time.After(bound):
				got <- "context not cancelled"
			}
		})))
	srv := serve(t, mux)
	if a := post(t, srv, "/orders/9/pay"); a.err != nil {
		t.Fatal(a.err)
	}
	if cause := <-got; !strings.Contains(cause, "lock lost") {
		t.Fatalf("handler's context cause: %s, want the lock loss", cause)
	}
	if len(got) != 1 || <-got != "lost" {
		t.Fatal("context.Cause does not match dlock.ErrLockLost")
	}
	if !strings.Contains(logs.String(), "lock lost while the handler ran") {
		t.Errorf("log %q does not report the loss", logs.String())
	}
	if _, ok := dlock.LockFrom(context.Background()); ok {
		t.Error("FromContext of a bare context reports a lock")
	}
}

func TestBadRequestAndSetupErrors(t *testing.T) {
	s := redistest.Start(t)
	l := newLocker(t, s.Client(t))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle("GET /carts/{cart}", mustNew(t, l, "cart:{header:X-Tenant}:{cart}")(ok))
	mux.Handle("GET /files/{path...}", mustNew(t, l, "file:{path}")(ok))
	mux.Handle("GET /orders/{id}", mustNew(t, l, "order:{orderId}")(ok)) // template and route disagree
	mux.Handle("GET /nil/{id}", mustNew(t, l, "nil:{id}")(nil))
	srv := serve(t, mux)
	get := func(path string, h http.Header) answer {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		return do(ctx, srv.Client(), http.MethodGet, srv.URL+path, h)
	}

	if a := get("/carts/c1", http.Header{"X-Tenant": {"acme"}}); a.status != http.StatusOK {
		t.Errorf("with the header: %d %s", a.status, a.body)
	}
	a := get("/carts/c1", nil)
	if p := a.problem(t); a.status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(p["detail"]), "empty value for {header:X-Tenant}") {
		t.Errorf("without the header: %d %s, want 400 naming {header:X-Tenant}", a.status, a.body)
	}
	if a := get("/files/", nil); a.status != http.StatusBadRequest {
		t.Errorf("empty rest wildcard: %d %s, want 400", a.status, a.body)
	}
	if a := get("/files/"+strings.Repeat("x", dlock.MaxKeyLen), nil); a.status != http.StatusBadRequest {
		t.Errorf("key over MaxKeyLen: %d %s, want 400", a.status, a.body)
	}
	a = get("/orders/1", nil)
	if a.problem(t); a.status != http.StatusInternalServerError {
		t.Errorf("template naming a wildcard the route lacks: %d %s, want 500", a.status, a.body)
	}
	if a := get("/nil/1", nil); a.status != http.StatusInternalServerError {
		t.Errorf("nil handler: %d %s, want 500", a.status, a.body)
	}
}

func TestStatusLocked(t *testing.T) {
	s := redistest.Start(t)
	l := newLocker(t, s.Client(t))
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("PUT /docs/{doc}", mustNewWith(t, httplock.Middleware{Status: http.StatusLocked},
		l, "doc:{doc}", dlock.WithLease(3*time.Second))(g))
	srv := serve(t, mux)
	put := func() answer {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		return do(ctx, srv.Client(), http.MethodPut, srv.URL+"/docs/readme", nil)
	}
	first := make(chan answer, 1)
	go func() { first <- put() }()
	g.waitEntered(t)
	a := put()
	p := a.problem(t)
	if secs, _ := strconv.Atoi(a.retryAfter); a.status != http.StatusLocked || p["title"] != "Locked" || secs < 1 || secs > 3 {
		t.Errorf("busy with WithStatus(423) and a 3s lease: %d Retry-After %q %s, want 423 and 1 to 3 seconds", a.status, a.retryAfter, a.body)
	}
	close(g.release)
	if a := <-first; a.status != http.StatusOK {
		t.Errorf("holder: %d %s", a.status, a.body)
	}
}

func TestServiceUnavailableWhenRedisPaused(t *testing.T) {
	s := redistest.Start(t)
	opts := s.Options()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, -1
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	l := newLocker(t, c)
	var logs syncbuf.Buffer
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", mustNewWith(t, httplock.Middleware{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		l, "order:{orderId}", dlock.WithTTL(time.Second))(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	srv := serve(t, mux)
	if a := post(t, srv, "/orders/1/pay"); a.status != http.StatusNoContent { // connections are warm
		t.Fatalf("before the pause: %d %s", a.status, a.body)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			s.Resume()
		}
	})
	a := post(t, srv, "/orders/1/pay")
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	p := a.problem(t)
	if a.status != http.StatusServiceUnavailable || p["detail"] != "the lock service is unavailable" || a.retryAfter != "" {
		t.Fatalf("paused Redis: %d %s, want 503 with the generic detail", a.status, a.body)
	}
	for _, internal := range []string{"127.0.0.1", "timeout", "redis", "dlock", "order:1"} {
		if bytes.Contains(bytes.ToLower(a.body), []byte(internal)) {
			t.Errorf("503 body %s leaks %q", a.body, internal)
		}
	}
	if !strings.Contains(logs.String(), "lock backend failed") {
		t.Errorf("log %q does not record the backend error", logs.String())
	}

	// The script may have run once Redis woke; its lease (1s) ends on its
	// own. The service recovers within the bound.
	for deadline := time.Now().Add(bound); ; {
		a := post(t, srv, "/orders/1/pay")
		if a.status == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after resume: %d %s", a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond) // poll interval; the deadline bounds the wait
	}
}

func TestOwnerReentrancy(t *testing.T) {
	s := redistest.Start(t)
	l := newLocker(t, s.Client(t))
	lock := mustNew(t, l, "order:{orderId}")
	fences := make(chan uint64, 2)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lk, _ := dlock.LockFrom(r.Context())
		fences <- lk.Fence()
	})
	g := newGate()
	withOwner := func(h http.Handler) http.Handler { // an earlier middleware sets the owner from a request id
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(dlock.ContextWithOwner(r.Context(), r.Header.Get("X-Request-Id"))))
		})
	}
	mux := http.NewServeMux()
	// The same key taken twice on one request's path: the request's own
	// owner id makes the inner hold reentrant instead of ErrAlreadyHeld.
	mux.Handle("POST /nested/{orderId}", lock(lock(inner)))
	mux.Handle("POST /owned/{orderId}", withOwner(lock(g)))
	srv := serve(t, mux)

	if a := post(t, srv, "/nested/8"); a.status != http.StatusOK {
		t.Fatalf("nested locks of one key: %d %s, want 200", a.status, a.body)
	}
	if f := <-fences; f == 0 {
		t.Fatal("inner handler saw no lock")
	}

	send := func(id string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			ch <- do(ctx, srv.Client(), http.MethodPost, srv.URL+"/owned/8", http.Header{"X-Request-Id": {id}})
		}()
		return ch
	}
	first := send("req-1")
	g.waitEntered(t)
	if a := <-send("req-2"); a.status != http.StatusConflict {
		t.Errorf("another owner: %d %s, want 409", a.status, a.body)
	}
	same := send("req-1") // a retry of the same request id holds the lock too
	g.waitEntered(t)
	close(g.release)
	for _, ch := range []<-chan answer{first, same} {
		if a := <-ch; a.status != http.StatusOK {
			t.Errorf("owner req-1: %d %s, want 200", a.status, a.body)
		}
	}
	waitGone(t, s.Client(t), "dlock:lock:order:8")
}

// Closing the Locker while a handler runs releases its lock, so the
// handler's context is cancelled with a cause matching ErrClosed: it must
// not go on writing while another server may hold the key.
func TestLockerCloseCancelsRequest(t *testing.T) {
	s := redistest.Start(t)
	l := newLocker(t, s.Client(t))
	running := make(chan struct{})
	got := make(chan error, 1)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", mustNew(t, l, "order:{orderId}")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			close(running)
			select {
			case <-r.Context().Done():
				got <- context.Cause(r.Context())
			case <-time.After(bound):
				got <- errors.New("context not cancelled")
			}
		})))
	srv := serve(t, mux)
	answered := make(chan error, 1)
	go func() { answered <- post(t, srv, "/orders/7/pay").err }()
	select {
	case <-running:
	case err := <-answered:
		t.Fatalf("answered before the handler ran: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cause := <-got; !errors.Is(cause, dlock.ErrClosed) {
		t.Fatalf("handler's context cause: %v, want ErrClosed", cause)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
