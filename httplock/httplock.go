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

// DefaultStatus answers a request whose lock is busy.
const DefaultStatus = http.StatusConflict

// Middleware holds the settings of the middleware itself; the lock's own
// options are dlock's, given to New. The zero Middleware answers a busy
// lock with 409 Conflict and logs nothing.
type Middleware struct {
	// Status answers a request whose lock is busy: http.StatusConflict
	// (409, the default, when zero) or http.StatusLocked (423). New refuses
	// other codes.
	Status int
	// Logger receives what the client is not told: backend errors behind a
	// 503, release errors, locks lost while a handler ran, and templates
	// that do not match the route. Nil logs nothing.
	Logger *slog.Logger
}

// New returns middleware that runs a handler only while it holds the lock
// named by filling template (see package keytmpl) from the request, with
// the zero [Middleware]'s settings. opts are the acquisition's options,
// over the Locker's own defaults: a request makes one attempt unless opts
// say dlock.WithWait(d), and dlock.WithTTL, dlock.WithFair and the rest
// apply as they do to Locker.Lock.
func New(locker dlock.Locker, template string, opts ...dlock.Option) (func(http.Handler) http.Handler, error) {
	return Middleware{}.New(locker, template, opts...)
}

// New is the package's New with m's settings.
//
// It returns an error when locker is nil, the template does not parse (a
// *keytmpl.SyntaxError with the offset), an option is out of range or
// applies to a Locker only (matching dlock.ErrInvalidOption or
// dlock.ErrInvalidTTL), or m.Status is not 409 or 423, so that a bad setup
// fails at startup, never per request. The answers are listed in the
// package documentation. The middleware given a nil handler answers every
// request with 500 Internal Server Error.
func (m Middleware) New(locker dlock.Locker, template string, opts ...dlock.Option) (func(http.Handler) http.Handler, error) {
	if locker == nil {
		return nil, fmt.Errorf("httplock: nil locker: %w", dlock.ErrNilClient)
	}
	tpl, err := keytmpl.Parse(template)
	if err != nil {
		return nil, err
	}
	switch m.Status {
	case 0:
		m.Status = DefaultStatus
	case http.StatusConflict, http.StatusLocked:
	default:
		return nil, fmt.Errorf("httplock: %w: busy status %d (want %d or %d)", dlock.ErrInvalidOption, m.Status, http.StatusConflict, http.StatusLocked)
	}
	// One attempt unless the caller asks to wait: Lock with WithWait(0) is
	// TryLock.
	lockOpts := append([]dlock.Option{dlock.WithWait(0)}, opts...)
	if _, err := (dlock.Options{}).Apply(lockOpts...); err != nil {
		return nil, fmt.Errorf("httplock: %w", err)
	}
	log := m.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mw := &middleware{
		locker: locker,
		tpl:    tpl,
		status: m.Status,
		opts:   lockOpts,
		log:    log.With("component", "httplock", "template", tpl.String()),
	}
	return mw.wrap, nil
}

type middleware struct {
	locker dlock.Locker
	tpl    *keytmpl.Template
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
		if err != nil {
			m.badKey(w, err)
			return
		}
		// Do gives a request without an owner a fresh one: two requests of
		// this process contend like two processes, and the second waits
		// (WithWait) instead of failing with ErrAlreadyHeld.
		served := false
		err = dlock.Do(r.Context(), m.locker, key, func(ctx context.Context) error {
			served = true
			next.ServeHTTP(w, r.WithContext(ctx))
			return nil
		}, m.opts...)
		switch {
		case !served:
			m.notAcquired(w, r, err)
		case errors.Is(err, dlock.ErrLockLost):
			m.log.Warn("httplock: lock lost while the handler ran", "err", err)
		case err != nil:
			m.log.Error("httplock: release failed", "err", err)
		}
	})
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
