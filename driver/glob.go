package driver

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Pattern is a key pattern of dlock.Inspector.List, in Redis's glob
// syntax on every backend: * matches any run of characters, ? one
// character, [abc], [a-z] and [^a] a set, and \ escapes. Drivers whose
// store cannot match (etcd) match with it; the others check with it, so
// that a malformed pattern is the same error everywhere.
type Pattern struct{ p []rune }

// ParsePattern parses pattern ("" matches every key). A malformed one (an
// unclosed [, a trailing \) is an error matching path.ErrBadPattern.
func ParsePattern(pattern string) (Pattern, error) {
	if pattern == "" {
		pattern = "*"
	}
	p := []rune(pattern)
	if err := checkGlob(p); err != nil {
		return Pattern{}, fmt.Errorf("dlock: list: pattern %q: %w", pattern, err)
	}
	return Pattern{p}, nil
}

// String returns the pattern.
func (p Pattern) String() string { return string(p.p) }

// Match reports whether key matches the pattern.
func (p Pattern) Match(key string) bool { return globMatch(p.p, []rune(key)) }

// Under returns the pattern of the keys that start with prefix and go on
// as p matches, in Redis's glob syntax (SCAN MATCH): prefix with its
// special characters escaped, then p.
func (p Pattern) Under(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteString(string(p.p))
	return b.String()
}

// Literal returns the characters of the pattern before its first special
// one: every key that matches starts with them.
func (p Pattern) Literal() string { return literalHead(p.p) }

// checkGlob reports a malformed glob pattern: an unclosed set or a
// trailing backslash.
func checkGlob(p []rune) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return fmt.Errorf("%w: trailing \\", path.ErrBadPattern)
			}
			i++
		case '[':
			n := setWidth(p[i:])
			if n < 0 {
				return fmt.Errorf("%w: unclosed [", path.ErrBadPattern)
			}
			i += n - 1
		}
	}
	return nil
}

func literalHead(p []rune) string {
	i := slices.IndexFunc(p, func(r rune) bool { return strings.ContainsRune(`*?[\`, r) })
	if i < 0 {
		return string(p)
	}
	return string(p[:i])
}

// setWidth returns the length of the set at the start of p ("[...]"), or
// -1 when it is not closed.
func setWidth(p []rune) int {
	i := 1
	if i < len(p) && p[i] == '^' {
		i++
	}
	for ; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case ']':
			return i + 1
		}
	}
	return -1
}

// matchSet reports whether c is in the set at the start of p, which
// checkGlob has found closed.
func matchSet(p []rune, c rune) bool {
	end := setWidth(p) - 1
	i, neg := 1, false
	if p[i] == '^' {
		i, neg = 2, true
	}
	in := false
	for i < end {
		lo := p[i]
		if lo == '\\' {
			i++
			lo = p[i]
		}
		i++
		hi := lo
		if i+1 < end && p[i] == '-' {
			hi = p[i+1]
			if hi == '\\' && i+2 < end {
				hi = p[i+2]
				i++
			}
			i += 2
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		if lo <= c && c <= hi {
			in = true
		}
	}
	return in != neg
}

// globMatch reports whether s matches the glob pattern p, which checkGlob
// accepts. A star backtracks to the last star only, so the match takes
// time proportional to len(p)*len(s) at most.
func globMatch(p, s []rune) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starPx, starSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			case '[':
				if sx < len(s) && matchSet(p[px:], s[sx]) {
					px += setWidth(p[px:])
					sx++
					continue
				}
			case '\\':
				if sx < len(s) && p[px+1] == s[sx] {
					px += 2
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if starSx > 0 && starSx <= len(s) {
			px, sx = starPx, starSx
			continue
		}
		return false
	}
	return true
}
