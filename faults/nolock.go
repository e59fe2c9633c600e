package faults

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// noLock is a Locker that excludes nothing: every call acquires at once,
// with fence 0. The checker's self-test runs it to prove the checker sees
// overlapping holds.
type noLock struct{}

func (noLock) TryLock(ctx context.Context, key string, _ ...dlock.Option) (dlock.Lock, error) {
	return &noHold{key: key, done: make(chan struct{})}, nil
}

func (n noLock) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (noLock) Unlock(context.Context, string) error { return dlock.ErrNotHeld }
func (noLock) Close() error                         { return nil }

type noHold struct {
	key  string
	done chan struct{}
}

func (h *noHold) Key() string                                  { return h.key }
func (h *noHold) Token() string                                { return "none" }
func (h *noHold) Fence() uint64                                { return 0 }
func (h *noHold) Unlock(context.Context) error                 { close(h.done); return nil }
func (h *noHold) Refresh(context.Context, time.Duration) error { return nil }
func (h *noHold) TTL(context.Context) (time.Duration, error)   { return time.Hour, nil }
func (h *noHold) Done() <-chan struct{}                        { return h.done }
func (h *noHold) Err() error                                   { return nil }
