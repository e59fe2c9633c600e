package dlockotel_test

import (
	"testing"

	"github.com/dlock-go/dlock/dlockotel"
)

var names = []struct{ key, want string }{
	{"order:42", "order:*"},
	{"user/42/cart", "user/*/cart"},
	{"job:3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31:run", "job:*:run"},
	{"3F2B9C1E-8D4A-4F6B-9E2D-7C1A5B8E0F31", "*"},
	{"nightly-report", "nightly-report"},
	{"shard7:order:1:2", "shard7:order:*:*"},
	{"blob:5f3a9c0d2e7b4a1c9d8e", "blob:*"},          // 20 hex characters, with digits
	{"tag:deadbeefdeadbeef", "tag:deadbeefdeadbeef"}, // hex, but no digit: a word
	{"v2.1", "v2.*"},
	{"a=1,b=22", "a=*,b=*"},
	{"", ""},
	{"::", "::"},
	{"x-3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31", "x-*"},
	{"3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31x", "3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31x"}, // no UUID: it runs on
}

func TestLockName(t *testing.T) {
	for _, tc := range names {
		if got := dlockotel.LockName(tc.key); got != tc.want {
			t.Errorf("LockName(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// A name is a fixed point: naming it again changes nothing, and it is never
// longer than the key.
func FuzzLockName(f *testing.F) {
	for _, tc := range names {
		f.Add(tc.key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		name := dlockotel.LockName(key)
		if again := dlockotel.LockName(name); again != name {
			t.Errorf("LockName(%q) = %q, and LockName of that = %q", key, name, again)
		}
		if len(name) > len(key) {
			t.Errorf("LockName(%q) = %q, longer than the key", key, name)
		}
	})
}
