package election

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Election is a leader election on one key of a [dlock.Locker]. Create it
// with [New]; it is safe for concurrent use, and holds no goroutine of its
// own: each Campaign, Leadership and Observe owns what it starts.
type Election struct {
	locker dlock.Locker
	key    string
	opts   []dlock.Option
}

// MaxValueLen is the longest value, in bytes, that a campaigner may stand
// with. The value travels in the lock's owner id, beside a random id.
const MaxValueLen = dlock.MaxKeyLen - len(ownerTag) - 2*idLen - 1

// ownerTag starts the owner id of every campaign: "el:<id>:<value>".
const ownerTag = "el:"

// idLen is the length in bytes of a campaign's random id, before hex.
const idLen = 12

// New returns the election on key of l. opts apply to every campaign's
// acquisition: dlock.WithTTL for the lease (a leader's loss is noticed
// within it), dlock.WithRetry for the waiters' fallback. The election sets
// the owner and asks for a fence itself. New returns an error matching
// dlock.ErrNilClient for a nil Locker and dlock.ErrInvalidKey for an empty
// or too long key; the driver checks the rest of the key at the first call.
func New(l dlock.Locker, key string, opts ...dlock.Option) (*Election, error) {
	if l == nil {
		return nil, dlock.ErrNilClient
	}
	if key == "" || len(key) > dlock.MaxKeyLen {
		return nil, driver.Wrap("election", key, fmt.Errorf("%w: a key has 1 to %d bytes", dlock.ErrInvalidKey, dlock.MaxKeyLen))
	}
	return &Election{locker: l, key: key, opts: opts}, nil
}

// Key returns the key the election holds its lock on.
func (e *Election) Key() string { return e.key }

// Campaign waits until the caller is elected with value, which every
// observer reads (an address, a host name), and returns the leadership.
// It waits as a Lock call does: until elected or ctx ends (then the error
// matches dlock.ErrNotAcquired and ctx.Err()), or as the election's
// options bound it. ctx bounds the campaign only: the leadership lasts
// until it is resigned or lost.
//
// Each campaign acquires for an owner id of its own, so two campaigns,
// even of one process, never share a hold.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	if len(value) > MaxValueLen {
		return nil, driver.Invalid("campaign", e.key, "a value over %d bytes", MaxValueLen)
	}
	owner := ownerTag + newID() + ":" + value
	opts := append(e.opts[:len(e.opts):len(e.opts)], dlock.WithOwner(owner), dlock.WithFencing(true))
	lk, err := e.locker.Lock(ctx, e.key, opts...)
	if err != nil {
		return nil, err
	}
	return newLeadership(ctx, lk, value), nil
}

// Leader is who leads an election, as the lock store last said.
type Leader struct {
	// Elected says whether anyone leads: false when the office is vacant.
	Elected bool
	// Value is what the leader campaigned with.
	Value string
	// Epoch is the fence of the leader's election: it grows with every
	// leader. Zero when vacant.
	Epoch uint64
}

// String reads "vacant", or the leader's value and epoch.
func (l Leader) String() string {
	if !l.Elected {
		return "vacant"
	}
	return fmt.Sprintf("%q (epoch %d)", l.Value, l.Epoch)
}

// Leader reads who leads now, in one read of the lock. It needs a Locker
// that implements dlock.Inspector, else it returns an error matching
// errors.ErrUnsupported.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	in, ok := e.locker.(dlock.Inspector)
	if !ok {
		return Leader{}, unsupported(e.locker, "dlock.Inspector")
	}
	info, err := in.Inspect(ctx, e.key)
	if err != nil {
		return Leader{}, err
	}
	return leaderOf(info), nil
}

// leaderOf reads the leader from what the store holds about the lock. A
// lock held by someone other than a campaign (a plain lock on the key)
// reads as a leader whose value is its owner id, empty for none.
func leaderOf(info dlock.Info) Leader {
	if !info.Held {
		return Leader{}
	}
	return Leader{Elected: true, Value: valueOf(info.Owner), Epoch: info.Fence}
}

// valueOf returns the value a campaign's owner id carries, or the owner
// id itself when it is not a campaign's.
func valueOf(owner string) string {
	rest, ok := strings.CutPrefix(owner, ownerTag)
	if !ok || len(rest) <= 2*idLen || rest[2*idLen] != ':' {
		return owner
	}
	return rest[2*idLen+1:]
}

// newID returns a random id of idLen bytes, in hex.
func newID() string {
	var b [idLen]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func unsupported(l dlock.Locker, what string) error {
	return fmt.Errorf("election: %T does not implement %s: %w", l, what, errors.ErrUnsupported)
}
