package faults

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// noLock is a Locker, a Semaphore and an RWLocker that excludes nothing:
// every call acquires at once, with a fence that only grows (the machine's
// CLOCK_MONOTONIC, which every worker shares), as a fencing lock would
// hand out. The checker's self-test runs it to prove the checker sees
// overlapping holds, permits beyond the limit and writers beside readers,
// from the exclusion alone.
type noLock struct{}

var (
	_ dlock.Semaphore = noLock{}
	_ dlock.RWLocker  = noLock{}
)

func (noLock) TryLock(ctx context.Context, key string, _ ...dlock.Option) (dlock.Lock, error) {
	return &noHold{key: key, fence: uint64(now()), done: make(chan struct{})}, nil
}

func (n noLock) Lock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (noLock) Unlock(context.Context, string) error { return dlock.ErrNotHeld }
func (noLock) Close() error                         { return nil }

func (n noLock) TryAcquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	if err := driver.CheckLimit(limit); err != nil {
		return nil, err
	}
	return n.TryLock(ctx, key, opts...)
}

func (n noLock) Acquire(ctx context.Context, key string, limit int, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryAcquire(ctx, key, limit, opts...)
}

func (n noLock) TryRLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (n noLock) RLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (n noLock) TryWLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (n noLock) WLock(ctx context.Context, key string, opts ...dlock.Option) (dlock.Lock, error) {
	return n.TryLock(ctx, key, opts...)
}

func (n noLock) Release(ctx context.Context, key string) error { return n.Unlock(ctx, key) }
func (n noLock) RUnlock(ctx context.Context, key string) error { return n.Unlock(ctx, key) }
func (n noLock) WUnlock(ctx context.Context, key string) error { return n.Unlock(ctx, key) }

type noHold struct {
	key   string
	fence uint64
	done  chan struct{}
}

func (h *noHold) Key() string                                  { return h.key }
func (h *noHold) Token() string                                { return "none" }
func (h *noHold) Fence() uint64                                { return h.fence }
func (h *noHold) Unlock(context.Context) error                 { close(h.done); return nil }
func (h *noHold) Refresh(context.Context, time.Duration) error { return nil }
func (h *noHold) TTL(context.Context) (time.Duration, error)   { return time.Hour, nil }
func (h *noHold) Done() <-chan struct{}                        { return h.done }
func (h *noHold) Err() error                                   { return nil }
func (h *noHold) Downgrade(context.Context) error              { return nil }
