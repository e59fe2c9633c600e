package dlock

import (
	"context"
	"fmt"
)

// WithOwner makes an acquisition reentrant for owner id: acquiring a key
// the owner already holds succeeds at once and adds a hold, and the key is
// released when the last hold is, even when the holds come from different
// processes acting for the same owner (a request id, a trace id, a job
// id). It overrides the owner a context carries (see [ContextWithOwner]).
// An empty id means no owner.
func WithOwner(id string) Option {
	return func(o *Options) {
		if len(id) > MaxKeyLen {
			o.Reject(fmt.Errorf("%w: owner id over %d bytes", ErrInvalidOption, MaxKeyLen))
			return
		}
		o.Owner = id
	}
}

// ContextWithOwner returns a context that carries owner id: every
// acquisition made with it is made for id, as if with [WithOwner](id),
// and [Locker.Unlock] with it releases id's hold. An empty id removes the
// owner.
func ContextWithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

type ownerKey struct{}

// OwnerFrom returns the owner id that ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	id, _ := ctx.Value(ownerKey{}).(string)
	return id, id != ""
}
