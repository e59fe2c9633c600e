package httplock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/keytmpl"
)

// Defaults of the options.
const (
	// DefaultTTL is the lease of a request's lock (seed 000's ttlMs). The
	// Locker's watchdog renews it while the handler runs, so it bounds how
	// long a crashed server keeps the key, not how long a handler may take.
	DefaultTTL = 10 * time.Second
	// DefaultStatus answers a request whose lock is busy.
	DefaultStatus = http.StatusConflict
)

// An Option configures the middleware that New builds.
type Option func(*config)

type config struct {
	ttl      time.Duration
	wait     time.Duration
	retry    time.Duration
	status   int
	lockOpts []dlock.Option
	logger   *slog.Logger
	invalid  []error
}

func (c *config) fail(format string, args ...any) {
	c.invalid = append(c.invalid, fmt.Errorf("httplock: %w: "+format, append([]any{dlock.ErrInvalidOption}, args...)...))
}

// WithTTL sets the lease of each request's lock (default 10s). It must be
// at least dlock.MinTTL.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) {
		if ttl < dlock.MinTTL {
			c.fail("ttl %v is below %v", ttl, dlock.MinTTL)
			return
		}
		c.ttl = ttl
	}
}

// WithWait makes a request whose key is busy wait up to d for it before
// the busy answer (seed 000's waitMs). The default, 0, answers at once.
// A wait also ends when the request's context does (the client went away).
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("negative wait %v", d)
			return
		}
		c.wait = d
	}
}

// WithRetryInterval sets the pause between the attempts of a waiting
// request (seed 000's retryMs); the default is the Locker's. It matters
// only with WithWait.
func WithRetryInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("retry interval %v is not positive", d)
			return
		}
		c.retry = d
	}
}

// WithStatus sets the status of the busy answer: http.StatusConflict (409,
// the default) or http.StatusLocked (423). Other codes are refused.
func WithStatus(code int) Option {
	return func(c *config) {
		if code != http.StatusConflict && code != http.StatusLocked {
			c.fail("busy status %d (want %d or %d)", code, http.StatusConflict, http.StatusLocked)
			return
		}
		c.status = code
	}
}

// WithLockOptions passes extra options to every acquisition, after the
// ones New derives from WithTTL, WithWait and WithRetryInterval, so they
// win over them: dlock.WithFair(true), dlock.WithLease(ttl) (no watchdog),
// and so on. Locker-only options (dlock.WithPrefix) are refused by New.
// Set the wait with WithWait, not dlock.WithWait: without WithWait a
// request makes a single attempt (TryLock), which ignores dlock.WithWait.
func WithLockOptions(opts ...dlock.Option) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithLogger logs what the client is not told: backend errors behind a 503,
// release errors, locks lost while a handler ran, and templates that do not
// match the route. By default the middleware logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.fail("nil logger")
			return
		}
		c.logger = l
	}
}

type lockKey struct{}

// FromContext returns the lock that the middleware holds for the request
// whose context is ctx. Use its Fence to guard writes, and watch ctx: it is
// cancelled, with the reason as context.Cause, if the hold ends before the
// handler returns (the lock was lost, or the Locker closed).
func FromContext(ctx context.Context) (dlock.Lock, bool) {
	lk, ok := ctx.Value(lockKey{}).(dlock.Lock)
	return lk, ok
}

// New returns middleware that runs a handler only while it holds the lock
// named by filling template (see package keytmpl) from the request.
//
// It returns an error when locker is nil, the template does not parse (a
// *keytmpl.SyntaxError with the offset) or an option is out of range
// (matching dlock.ErrInvalidOption or dlock.ErrInvalidTTL), so that a bad
// setup fails at startup, never per request. The answers are listed in the
// package documentation. The middleware given a nil handler answers every
// request with 500 Internal Server Error.
func New(locker dlock.Locker, template string, opts ...Option) (func(http.Handler) http.Handler, error) {
	if locker == nil {
		return nil, fmt.Errorf("httplock: nil locker: %w", dlock.ErrNilClient)
	}
	tpl, err := keytmpl.Parse(template)
	if err != nil {
		return nil, err
	}
	c := config{ttl: DefaultTTL, status: DefaultStatus}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if len(c.invalid) > 0 {
		return nil, c.invalid[0]
	}
	lockOpts := []dlock.Option{dlock.WithTTL(c.ttl)}
	if c.wait > 0 {
		lockOpts = append(lockOpts, dlock.WithWait(c.wait))
	}
	if c.retry > 0 {
		lockOpts = append(lockOpts, dlock.WithRetry(dlock.FixedInterval(c.retry)))
	}
	lockOpts = append(lockOpts, c.lockOpts...)
	if _, err := (dlock.Options{}).Apply(lockOpts...); err != nil {
		return nil, fmt.Errorf("httplock: %w", err)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	m := &middleware{
		locker: locker,
		tpl:    tpl,
		wait:   c.wait > 0,
		status: c.status,
		opts:   lockOpts,
		log:    c.logger.With("component", "httplock", "template", tpl.String()),
	}
	return m.wrap, nil
}

type middleware struct {
	locker dlock.Locker
	tpl    *keytmpl.Template
	wait   bool
	status int
	opts   []dlock.Option
	log    *slog.Logger
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if next == nil {
			m.log.Error("httplock: nil handler")
			m.problem(w, http.StatusInternalServerError, "", nil)
			return
		}
		key, err := m.tpl.RequestKey(r)
		if err == nil {
			err = dlock.CheckKey(key)
		}
		if err != nil {
			m.badKey(w, err)
			return
		}
		ctx := r.Context()
		if _, ok := dlock.OwnerFrom(ctx); !ok {
			// Each request is a party of its own: two requests of this
			// process contend like two processes, and the second waits
			// (WithWait) instead of failing with ErrAlreadyHeld.
			ctx = dlock.WithOwner(ctx, dlock.NewToken())
		}
		var lk dlock.Lock
		if m.wait {
			lk, err = m.locker.Lock(ctx, key, m.opts...)
		} else {
			lk, err = m.locker.TryLock(ctx, key, m.opts...)
		}
		if err != nil {
			m.notAcquired(w, r, err)
			return
		}
		m.serve(w, r.WithContext(ctx), lk, next)
	})
}

// serve runs next holding lk, and releases lk when next returns or panics.
func (m *middleware) serve(w http.ResponseWriter, r *http.Request, lk dlock.Lock, next http.Handler) {
	ctx, release := dlock.Guard(r.Context(), lk)
	defer func() {
		err := release()
		if errors.Is(err, dlock.ErrLockLost) {
			m.log.Warn("httplock: lock lost while the handler ran", "err", err)
		} else if err != nil {
			m.log.Error("httplock: release failed", "err", err)
		}
	}()
	next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, lockKey{}, lk)))
}

func (m *middleware) badKey(w http.ResponseWriter, err error) {
	var ve *keytmpl.ValueError
	switch {
	case errors.Is(err, keytmpl.ErrEmptyValue) && errors.As(err, &ve):
		m.problem(w, http.StatusBadRequest, "empty value for "+ve.Placeholder.String()+" in lock key template "+strconv.Quote(m.tpl.String()), nil)
	case errors.Is(err, dlock.ErrInvalidKey):
		m.problem(w, http.StatusBadRequest, "request values make an invalid lock key for template "+strconv.Quote(m.tpl.String()), nil)
	default: // ErrNotInRoute: the server's setup is wrong, not the request
		m.log.Error("httplock: lock key template does not match the route", "err", err)
		m.problem(w, http.StatusInternalServerError, "", nil)
	}
}

func (m *middleware) notAcquired(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, dlock.ErrAlreadyHeld):
		secs := 1
		var nae *dlock.NotAcquiredError
		if errors.As(err, &nae) && nae.RetryAfter > time.Second {
			secs = int((nae.RetryAfter + time.Second - 1) / time.Second)
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		m.problem(w, m.status, "another request holds the lock on this resource; retry later",
			map[string]any{"lockKeyTemplate": m.tpl.String(), "retryAfter": secs})
	case errors.Is(err, dlock.ErrInvalidKey):
		m.problem(w, http.StatusBadRequest, "request values make an invalid lock key for template "+strconv.Quote(m.tpl.String()), nil)
	case r.Context().Err() != nil:
		// The client is gone (or the server's deadline passed): nobody
		// reads this answer, and the backend is not to blame.
		m.problem(w, http.StatusServiceUnavailable, "", nil)
	default:
		m.log.Error("httplock: lock backend failed", "err", err)
		m.problem(w, http.StatusServiceUnavailable, "the lock service is unavailable", nil)
	}
}

// problem writes an RFC 9457 problem details object of type about:blank.
func (m *middleware) problem(w http.ResponseWriter, status int, detail string, ext map[string]any) {
	body := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status}
	if detail != "" {
		body["detail"] = detail
	}
	for k, v := range ext {
		body[k] = v
	}
	b, _ := json.Marshal(body) // strings and ints only: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
