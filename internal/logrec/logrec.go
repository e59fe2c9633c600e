// Package logrec is a slog.Handler that keeps every record, with its
// attributes and the context it was logged with, for tests that check
// what a Locker logs.
package logrec

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Record is one log record as the handler saw it.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string // by key, groups joined with "."; values as text
	Ctx     context.Context
}

// Handler keeps the records at or above its level. Handlers made by
// WithAttrs and WithGroup share their parent's records.
type Handler struct {
	level  slog.Level
	store  *store
	attrs  []slog.Attr
	groups []string
}

type store struct {
	mu   sync.Mutex
	recs []Record
}

// New returns a Handler that keeps the records at level and above.
func New(level slog.Level) *Handler { return &Handler{level: level, store: &store{}} }

// Enabled reports whether level is kept.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool { return level >= h.level }

// Handle keeps r.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Message: r.Message, Attrs: map[string]string{}, Ctx: ctx}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool {
		h.add(rec.Attrs, h.groups, a)
		return true
	})
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	h.store.recs = append(h.store.recs, rec)
	return nil
}

func (h *Handler) add(m map[string]string, groups []string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			h.add(m, append(slices.Clip(groups), a.Key), g)
		}
		return
	}
	key := a.Key
	for i := len(groups) - 1; i >= 0; i-- {
		key = groups[i] + "." + key
	}
	m[key] = v.String()
}

// WithAttrs returns a Handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clone(h.attrs)
	m := map[string]string{}
	for _, a := range attrs {
		h.add(m, h.groups, a)
	}
	for k, v := range m {
		c.attrs = append(c.attrs, slog.String(k, v))
	}
	return &c
}

// WithGroup returns a Handler that puts later attributes in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.groups = append(slices.Clip(h.groups), name)
	return &c
}

// Records returns the records kept so far.
func (h *Handler) Records() []Record {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	return slices.Clone(h.store.recs)
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// Conventions checks r against dlock's logging conventions: its message
// is one of messages (static text, never a value), every key is
// snake_case, and no value holds a secret.
func Conventions(r Record, messages []string, secrets ...string) error {
	if !slices.Contains(messages, r.Message) {
		return fmt.Errorf("message %q is not one of dlock's static messages", r.Message)
	}
	for k, v := range r.Attrs {
		if !snakeCase.MatchString(k) {
			return fmt.Errorf("%q: key %q is not snake_case", r.Message, k)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(v, s) {
				return fmt.Errorf("%q: %s holds a secret", r.Message, k)
			}
		}
	}
	return nil
}
