package redisnode

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redistest"
)

var keySeeds = []string{"order:1", "{user42}:cart", "a{b}c{d}", "{}x", "a}b", "}{", "{", "x{y", "{a}}", "ü:é", "a b\tc\n", strings.Repeat("z", 1000)}

// Every sibling of a lock key must hash to the lock key's slot, and no two
// locks may share a key name.
func FuzzSlot(f *testing.F) {
	for _, k := range keySeeds {
		f.Add("dlock", k)
	}
	f.Add("neton", "order:1")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if prefix == "" || len(prefix) > 64 || CheckPrefix(prefix) != nil {
			return
		}
		k, err := Of(prefix, key)
		if err != nil {
			if !errors.Is(err, dlock.ErrInvalidKey) {
				t.Fatalf("Of(%q, %q): %v, want ErrInvalidKey", prefix, key, err)
			}
			return
		}
		if k.Lock != prefix+":lock:"+key {
			t.Fatalf("lock key %q", k.Lock)
		}
		want := Slot(k.Lock)
		all := k.List()
		for _, s := range all[1:] {
			if got := Slot(s); got != want {
				t.Fatalf("key %q: sibling %q in slot %d, lock key %q in slot %d", key, s, got, k.Lock, want)
			}
			if strings.HasPrefix(s, prefix+":lock:") {
				t.Fatalf("sibling %q looks like a lock key", s)
			}
		}
		// Injectivity: the key can be read back from any sibling.
		for i, s := range all[1:] {
			if back := lockKeyOf(s); back != k.Lock {
				t.Fatalf("sibling %d %q reads back as %q, want %q", i, s, back, k.Lock)
			}
		}
	})
}

// lockKeyOf inverts the sibling layout: the lock key a sibling belongs to.
func lockKeyOf(sibling string) string {
	inner := sibling[1:strings.IndexByte(sibling, '}')]
	rest := sibling[len(inner)+2:]
	if rest[0] == ':' && len(rest) > 2 {
		return rest[1 : len(rest)-2] // "{T}:<lock key>:s"
	}
	return inner // "{<lock key>}:s"
}

// The slot function agrees with Redis's own CLUSTER KEYSLOT.
func TestSlotMatchesRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartConfig(t, redistest.Config{Cluster: true}).Client(t)
	for _, key := range keySeeds {
		k, err := Of("dlock", key)
		if err != nil {
			continue
		}
		for _, s := range k.List() {
			want, err := c.ClusterKeySlot(ctx, s).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := Slot(s); int64(got) != want {
				t.Errorf("Slot(%q) = %d, Redis says %d", s, got, want)
			}
		}
	}
}

func TestKeyLayout(t *testing.T) {
	for _, c := range []struct{ prefix, key, lock, meta string }{
		{"neton", "order:1", "neton:lock:order:1", "{neton:lock:order:1}:m"},
		{"dlock", "{user42}:cart", "dlock:lock:{user42}:cart", "{user42}:dlock:lock:{user42}:cart:m"},
	} {
		k, err := Of(c.prefix, c.key)
		if err != nil {
			t.Fatal(err)
		}
		if k.Lock != c.lock || k.Meta != c.meta {
			t.Errorf("Of(%q, %q) = %q, %q; want %q, %q", c.prefix, c.key, k.Lock, k.Meta, c.lock, c.meta)
		}
	}
}
