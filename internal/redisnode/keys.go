package redisnode

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Keys are the Redis keys of one lock, the same on every node. The lock key of K is exactly
// "<prefix>:lock:<K>", so that any client following the single-instance
// algorithm on that key contends correctly with dlock. Its siblings must sit
// in the same Redis Cluster slot, so that every script touches one slot:
//
//   - when the lock key has a hash tag T (Redis's rule: the text between the
//     first '{' and the first '}' after it, if not empty), a sibling is
//     "{T}:<lock key>:<s>";
//   - otherwise a sibling is "{<lock key>}:<s>", which hashes the whole lock
//     key, as the lock key itself is hashed. This needs a lock key without
//     '}', and keys for which it cannot hold are rejected with
//     dlock.ErrInvalidKey.
//
// s is one letter: m (meta: the fence counter of fenced acquisitions),
// h (the holds of an owner's lock), q (the wait queue; "<q>:<subscriber
// id>" is the channel that wakes one Locker's waiters), w (the waiters'
// entries) and o (present while someone watches the lock, see Watch; also
// the channel that tells the watchers of a change). The two forms never produce
// the same name for different locks, and no sibling is a lock key, because
// a prefix may not contain braces.
type Keys struct {
	Lock, Meta, Holds, Queue, Waiters, Observed string
}

// List returns the keys in the order the scripts expect.
func (k *Keys) List() [6]string {
	return [6]string{k.Lock, k.Meta, k.Holds, k.Queue, k.Waiters, k.Observed}
}

// Ptrs points at the keys, in the order of List.
func (k *Keys) Ptrs() [6]*string {
	return [6]*string{&k.Lock, &k.Meta, &k.Holds, &k.Queue, &k.Waiters, &k.Observed}
}

// CheckPrefix refuses a prefix that would break the layout.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: prefix %q contains a brace; hash tags belong in keys", dlock.ErrInvalidOption, prefix)
	}
	return nil
}

// Of lays out the keys of lock key under prefix, building all six
// names in one allocation.
func Of(prefix, key string) (Keys, error) { return In(prefix, ":lock:", key) }

// In lays out the keys of key in namespace ns (":lock:" for a lock) under
// prefix.
func In(prefix, ns, key string) (Keys, error) {
	if err := driver.CheckKey(key); err != nil {
		return Keys{}, err
	}
	// Every name is a slice of one string: the lock key, then the siblings.
	n := len(prefix) + len(ns) + len(key)
	var b strings.Builder
	b.Grow(n + 5*(2*n+6))
	b.WriteString(prefix)
	b.WriteString(ns)
	b.WriteString(key)
	lockKey := b.String()
	tag, tagged := HashTag(lockKey)
	if !tagged {
		if strings.IndexByte(lockKey, '}') >= 0 {
			return Keys{}, fmt.Errorf("%w: %q has a '}' but no hash tag, so its companion keys cannot share its cluster slot", dlock.ErrInvalidKey, key)
		}
		tag = lockKey
	}
	// base is "{tag}" or "{tag}:<lock key>"; each sibling is base + ":x".
	baseLen := len(tag) + 2
	if tagged {
		baseLen += 1 + len(lockKey)
	}
	for _, s := range "mhqwo" {
		b.WriteByte('{')
		b.WriteString(tag)
		b.WriteByte('}')
		if tagged {
			b.WriteByte(':')
			b.WriteString(lockKey)
		}
		b.WriteByte(':')
		b.WriteRune(s)
	}
	all := b.String()
	step := baseLen + 2
	sib := func(i int) string { return all[n+i*step : n+(i+1)*step] }
	return Keys{Lock: all[:n], Meta: sib(0), Holds: sib(1), Queue: sib(2), Waiters: sib(3), Observed: sib(4)}, nil
}

// HashTag returns the hash tag of a Redis key, by the rule Redis Cluster
// uses to pick its slot.
func HashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

// Slot is the Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag,
// or of the whole key when it has none, modulo 16384.
func Slot(key string) uint16 {
	if tag, ok := HashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// Args returns the keys boxed for a script call.
func (k *Keys) Args() []any {
	all := k.List()
	args := make([]any, len(all))
	for i, s := range all {
		args[i] = s
	}
	return args
}
