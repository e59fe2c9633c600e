package driver_test

import (
	"errors"
	"path"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

func glob(pattern, s string) (bool, error) {
	p, err := driver.ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	return p.Match(s), nil
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "a/b/c", true},
		{"a*", "a", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"*b*", "abc", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "añc", true},
		{"[abc]", "b", true},
		{"[abc]", "d", false},
		{"[a-c]x", "bx", true},
		{"[c-a]x", "bx", true},
		{"[^a-c]", "b", false},
		{"[^a-c]", "z", true},
		{"[a-]", "-", true},
		{`[\]]`, "]", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`a\?`, "a?", true},
		{"", "", true},
		{"", "a", true}, // "" lists every key,
		{"cron:*:daily", "cron:x:daily", true},
		{"cron:*:daily", "cron:x:weekly", false},
		{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	} {
		got, err := glob(tc.pattern, tc.s)
		if err != nil || got != tc.want {
			t.Errorf("Glob(%q, %q) = %v, %v; want %v", tc.pattern, tc.s, got, err, tc.want)
		}
	}
	for _, bad := range []string{"[", "[ab", `a\`, `[\]`, "[^"} {
		if _, err := glob(bad, "a"); !errors.Is(err, path.ErrBadPattern) {
			t.Errorf("Glob(%q): %v, want path.ErrBadPattern", bad, err)
		}
	}
}

// Under escapes the prefix, so that a key prefix with glob characters
// matches only itself, and keeps the pattern as it is.
func TestPatternUnder(t *testing.T) {
	for _, tc := range []struct{ prefix, pattern, want string }{
		{"dlock:lock:", "order:*", "dlock:lock:order:*"},
		{"a*b?[c]\\:lock:", "x?", `a\*b\?\[c\]\\:lock:x?`},
		{"p:", "", "p:*"}, // "" matches every key
	} {
		p, err := driver.ParsePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Under(tc.prefix); got != tc.want {
			t.Errorf("Under(%q) of %q = %q, want %q", tc.prefix, tc.pattern, got, tc.want)
		}
	}
}
