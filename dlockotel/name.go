package dlockotel

import "strings"

// LockName is the default name of a lock in metrics: key with each part
// that looks like an identifier replaced by "*", so that the number of
// names stays small however many keys there are. A part is a run of
// characters between the separators : / . _ - = , | # @ and space; it is
// replaced when it holds only digits, or is 16 hexadecimal characters or
// more with a digit among them (a hash, an object id). A UUID is replaced
// whole, separators and all.
//
//	order:42                                      order:*
//	user/42/cart                                  user/*/cart
//	job:3f2b9c1e-8d4a-4f6b-9e2d-7c1a5b8e0f31:run  job:*:run
//	nightly-report                                nightly-report
func LockName(key string) string {
	if !strings.ContainsAny(key, "0123456789") {
		return key // nothing to replace: no allocation
	}
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); {
		if isUUID(key[i:]) && (i == 0 || isSep(key[i-1])) && (i+36 == len(key) || isSep(key[i+36])) {
			b.WriteByte('*')
			i += 36
			continue
		}
		if isSep(key[i]) {
			b.WriteByte(key[i])
			i++
			continue
		}
		j := i
		for j < len(key) && !isSep(key[j]) {
			j++
		}
		if part := key[i:j]; isID(part) {
			b.WriteByte('*')
		} else {
			b.WriteString(part)
		}
		i = j
	}
	return b.String()
}

func isSep(c byte) bool { return strings.IndexByte(":/._-=,|#@ ", c) >= 0 }

// isID reports whether part is all digits, or 16 hexadecimal characters or
// more with a digit among them.
func isID(part string) bool {
	digits, hex := 0, 0
	for i := 0; i < len(part); i++ {
		switch c := part[i]; {
		case '0' <= c && c <= '9':
			digits++
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			hex++
		default:
			return false
		}
	}
	return digits > 0 && (hex == 0 || digits+hex >= 16)
}

// isUUID reports whether s starts with a UUID in its text form,
// 8-4-4-4-12 hexadecimal digits.
func isUUID(s string) bool {
	if len(s) < 36 {
		return false
	}
	for i := range 36 {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
