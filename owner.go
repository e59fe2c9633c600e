package dlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
)

type ownerKey struct{}

// WithOwner returns a context that carries owner id. Locks acquired with
// that context are reentrant for id: acquiring a key the owner already holds
// succeeds at once and adds a hold, and the key is released when the last
// hold is, even when the holds come from different processes acting for the
// same owner (a request id, a trace id, a job id). An empty id removes the
// owner.
func WithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFrom returns the owner id that ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	id, _ := ctx.Value(ownerKey{}).(string)
	return id, id != ""
}

// OwnerIn returns the owner of an acquisition: the one set by WithOwnerID in
// o, else the one ctx carries, else "".
func (o Options) OwnerIn(ctx context.Context) string {
	if o.Owner != "" {
		return o.Owner
	}
	id, _ := OwnerFrom(ctx)
	return id
}

// NewToken returns 128 random bits from crypto/rand, as 22 characters of
// unpadded URL-safe base64.
func NewToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it)
	var s [22]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}
