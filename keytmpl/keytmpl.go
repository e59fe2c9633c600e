// Package keytmpl builds lock keys from templates such as "order:{orderId}".
//
// A template is parsed once, at startup, by [Parse]; every syntax error is
// reported then, with the byte offset where it was found, never per request.
// Filling the template ([Template.Key], [Template.RequestKey]) is then a
// cheap loop that cannot fail except on an empty value.
//
// # Syntax
//
// A template is literal text with placeholders in braces:
//
//	order:{orderId}                 the path wildcard orderId (r.PathValue)
//	order:{path:orderId}            the same, with the source spelled out
//	tenant:{header:X-Tenant}:cart   the first X-Tenant request header
//	report:{query:month}            the first value of query parameter month
//
// A placeholder is "{name}" or "{source:name}", where source is path (the
// default), header or query. Path names follow net/http's wildcard names (a
// Go identifier); header names are HTTP tokens (RFC 9110); query names are
// printable ASCII without braces. A placeholder may appear only once.
// Literal text is printable ASCII (0x21 to 0x7E) without braces; there is no
// escape for a literal brace, because braces are also Redis Cluster hash
// tags and a lock key must not choose its own slot.
//
// # Distinct values, distinct keys
//
// A filled template is injective: two different assignments of values to
// the placeholders never give the same key. Two rules make it so.
//
//  1. Every value is escaped by [Escape]: each byte outside the unreserved
//     set of RFC 3986 (A-Z a-z 0-9 - . _ ~) becomes %XX with upper-case hex.
//     The escaped value therefore never holds ':', '{', '}', a space, a
//     control byte or a non-ASCII byte, and Escape itself is injective.
//  2. Two placeholders must be separated by literal text holding at least
//     one byte that an escaped value never holds (anything but the
//     unreserved bytes and '%'): "{a}:{b}" and "{a}/{b}" parse, "{a}{b}" and
//     "{a}-{b}" do not.
//
// With both, the first separator byte after a value marks where the value
// ends, so a key splits back into its values in exactly one way:
// "order:{a}:{b}" with a="1:2", b="3" gives "order:1%3A2:3" while a="1",
// b="2:3" gives "order:1:2%3A3". FuzzKeyInjective in the tests checks it.
package keytmpl

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest template, in bytes, that Parse accepts.
const MaxLen = 1024

// The errors of keytmpl. Compare with errors.Is.
var (
	// ErrSyntax matches every *SyntaxError.
	ErrSyntax = errors.New("keytmpl: syntax error")
	// ErrEmptyValue reports a placeholder whose value is empty. An HTTP
	// server answers it with 400 Bad Request.
	ErrEmptyValue = errors.New("keytmpl: empty value")
	// ErrNotInRoute reports a path placeholder that the request's route
	// pattern does not declare as a wildcard, or a request that no
	// [http.ServeMux] pattern matched: a mistake of the server's setup.
	ErrNotInRoute = errors.New("keytmpl: not a wildcard of the route")
)

// SyntaxError is the error of Parse. It matches ErrSyntax.
type SyntaxError struct {
	// Template is the text given to Parse.
	Template string
	// Offset is the byte offset in Template where the problem was found.
	Offset int
	// Msg says what is wrong.
	Msg string
}

func (e *SyntaxError) Error() string {
	return "keytmpl: parsing " + strconv.Quote(e.Template) + ": at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Is reports whether target is ErrSyntax.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// ValueError reports a placeholder whose value could not be used. It
// matches its Err (ErrEmptyValue or ErrNotInRoute).
type ValueError struct {
	Placeholder Placeholder
	Err         error
}

func (e *ValueError) Error() string {
	return "keytmpl: " + e.Placeholder.String() + ": " + strings.TrimPrefix(e.Err.Error(), "keytmpl: ")
}

// Unwrap returns Err.
func (e *ValueError) Unwrap() error { return e.Err }

// Source says where the value of a placeholder comes from.
type Source int

// The sources of a placeholder's value.
const (
	// Path is a wildcard of the route pattern: r.PathValue(name).
	Path Source = iota
	// Header is the first value of a request header: r.Header.Get(name).
	Header
	// Query is the first value of a query parameter: r.URL.Query().Get(name).
	Query
)

var sourceNames = [...]string{Path: "path", Header: "header", Query: "query"}

// String returns the name of s as written in a template.
func (s Source) String() string {
	if s >= 0 && int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Placeholder is one "{...}" of a template.
type Placeholder struct {
	Source Source
	Name   string
}

// String returns the placeholder as a template writes it in its shortest
// form: "{orderId}" for a path wildcard, "{header:X-Tenant}" otherwise.
func (p Placeholder) String() string {
	if p.Source == Path {
		return "{" + p.Name + "}"
	}
	return "{" + p.Source.String() + ":" + p.Name + "}"
}

// Template is a parsed key template. It is immutable and safe for
// concurrent use.
type Template struct {
	lits     []string // len(phs)+1 literal runs around the placeholders
	phs      []Placeholder
	explicit []bool // whether each placeholder spelled out its source
	size     int    // total length of the literals
}

// Parse parses a key template. Every error is a *SyntaxError that matches
// ErrSyntax and gives the byte offset of the problem.
func Parse(text string) (*Template, error) {
	fail := func(off int, format string, args ...any) (*Template, error) {
		return nil, &SyntaxError{Template: text, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if text == "" {
		return fail(0, "empty template")
	}
	if len(text) > MaxLen {
		return fail(MaxLen, "template longer than %d bytes", MaxLen)
	}
	t := &Template{}
	seen := map[Placeholder]int{}
	var lit strings.Builder
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '}':
			return fail(i, "'}' without a matching '{'")
		case c != '{':
			if c < 0x21 || c > 0x7e {
				return fail(i, "byte %#02x not allowed in literal text (printable ASCII only)", c)
			}
			lit.WriteByte(c)
			i++
			continue
		}
		// A placeholder starts at i.
		end := strings.IndexAny(text[i+1:], "{}")
		if end < 0 || text[i+1+end] == '{' {
			return fail(i, "unclosed '{'")
		}
		end += i + 1
		body := text[i+1 : end]
		p, explicit := Placeholder{Source: Path, Name: body}, false
		if src, name, ok := strings.Cut(body, ":"); ok {
			explicit = true
			switch src {
			case "path":
				p = Placeholder{Source: Path, Name: name}
			case "header":
				p = Placeholder{Source: Header, Name: name}
			case "query":
				p = Placeholder{Source: Query, Name: name}
			default:
				return fail(i+1, "unknown source %q (want path, header or query)", src)
			}
		}
		if p.Name == "" {
			return fail(i, "empty placeholder name")
		}
		if msg := checkName(p); msg != "" {
			return fail(i, "bad %s name %q: %s", p.Source, p.Name, msg)
		}
		dup := p
		if p.Source == Header {
			dup.Name = http.CanonicalHeaderKey(p.Name)
		}
		if first, ok := seen[dup]; ok {
			return fail(i, "duplicate placeholder %s (first at offset %d)", p, first)
		}
		seen[dup] = i
		if len(t.phs) > 0 && !separates(lit.String()) {
			return fail(i, "placeholder %s follows %s without a separator (literal text between them needs a byte other than A-Z a-z 0-9 - . _ ~ %%, such as ':')", p, t.phs[len(t.phs)-1])
		}
		t.lits = append(t.lits, lit.String())
		t.size += lit.Len()
		lit.Reset()
		t.phs = append(t.phs, p)
		t.explicit = append(t.explicit, explicit)
		i = end + 1
	}
	t.lits = append(t.lits, lit.String())
	t.size += lit.Len()
	return t, nil
}

// MustParse is Parse that panics on error, for templates fixed in the
// program's source.
func MustParse(text string) *Template {
	t, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return t
}

func checkName(p Placeholder) string {
	switch p.Source {
	case Path:
		// net/http's wildcard names: a Go identifier.
		for j, r := range p.Name {
			if r == utf8.RuneError || !(r == '_' || unicode.IsLetter(r) || j > 0 && unicode.IsDigit(r)) {
				return "not a Go identifier"
			}
		}
	case Header:
		for j := 0; j < len(p.Name); j++ {
			if !isTokenByte(p.Name[j]) {
				return "not an HTTP token"
			}
		}
	case Query:
		for j := 0; j < len(p.Name); j++ {
			if c := p.Name[j]; c < 0x21 || c > 0x7e {
				return "not printable ASCII"
			}
		}
	}
	return ""
}

// isTokenByte reports whether c is a tchar of RFC 9110.
func isTokenByte(c byte) bool {
	return isUnreserved(c) || c != 0 && strings.IndexByte("!#$%&'*+^`|", c) >= 0
}

// isUnreserved reports whether c is an unreserved byte of RFC 3986, the
// bytes that Escape leaves as they are.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// separates reports whether literal text between two placeholders holds a
// byte that no escaped value holds.
func separates(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; !isUnreserved(c) && c != '%' {
			return true
		}
	}
	return false
}

// String returns the template's text: Parse(t.String()) gives an equal
// template, and for a template from Parse(s), t.String() == s.
func (t *Template) String() string {
	var b strings.Builder
	for i, p := range t.phs {
		b.WriteString(t.lits[i])
		b.WriteByte('{')
		if t.explicit[i] {
			b.WriteString(p.Source.String())
			b.WriteByte(':')
		}
		b.WriteString(p.Name)
		b.WriteByte('}')
	}
	b.WriteString(t.lits[len(t.phs)])
	return b.String()
}

// Placeholders returns the template's placeholders in order.
func (t *Template) Placeholders() []Placeholder {
	return append([]Placeholder(nil), t.phs...)
}

// Key fills the template with the values that value returns, each escaped
// with Escape. An empty value gives a *ValueError matching ErrEmptyValue.
func (t *Template) Key(value func(Placeholder) string) (string, error) {
	vals := make([]string, len(t.phs))
	n := t.size
	for i, p := range t.phs {
		v := value(p)
		if v == "" {
			return "", &ValueError{Placeholder: p, Err: ErrEmptyValue}
		}
		vals[i] = Escape(v)
		n += len(vals[i])
	}
	var b strings.Builder
	b.Grow(n)
	for i, v := range vals {
		b.WriteString(t.lits[i])
		b.WriteString(v)
	}
	b.WriteString(t.lits[len(vals)])
	return b.String(), nil
}

// RequestKey fills the template from r: path placeholders from
// r.PathValue, header placeholders from r.Header.Get and query placeholders
// from r.URL.Query().Get (only the first value of a repeated header or
// parameter counts).
//
// A path placeholder needs a request routed by an [http.ServeMux] pattern
// that declares it ("{orderId}" or "{orderId...}"): otherwise RequestKey
// returns a *ValueError matching ErrNotInRoute, because the template and
// the route disagree. Wrap the handler registered on the mux, not the mux.
// A request built by hand (httptest) with r.SetPathValue is accepted too.
func (t *Template) RequestKey(r *http.Request) (string, error) {
	var query url.Values
	var routeErr error
	key, err := t.Key(func(p Placeholder) string {
		switch p.Source {
		case Header:
			return r.Header.Get(p.Name)
		case Query:
			if query == nil {
				query = r.URL.Query()
			}
			return query.Get(p.Name)
		}
		v := r.PathValue(p.Name)
		if v == "" && routeErr == nil && !declares(r.Pattern, p.Name) {
			routeErr = &ValueError{Placeholder: p, Err: ErrNotInRoute}
		}
		return v
	})
	if routeErr != nil {
		return "", routeErr
	}
	return key, err
}

// declares reports whether the ServeMux pattern declares wildcard name.
func declares(pattern, name string) bool {
	return strings.Contains(pattern, "{"+name+"}") || strings.Contains(pattern, "{"+name+"...}")
}

const upperhex = "0123456789ABCDEF"

// Escape returns s with every byte outside the unreserved set of RFC 3986
// (A-Z a-z 0-9 - . _ ~) written as %XX in upper-case hex. It is injective,
// and its result holds only unreserved bytes and '%'.
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isUnreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; isUnreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', upperhex[c>>4], upperhex[c&15])
		}
	}
	return string(b)
}
