package keytmpl

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

var parseErrorTests = []struct {
	in, contains string
}{
	{"", "at offset 0: empty template"},
	{"order:{orderId", "at offset 6: unclosed '{'"},
	{"order:{a{b}", "at offset 6: unclosed '{'"},
	{"{", "at offset 0: unclosed '{'"},
	{"order:{}", "at offset 6: empty placeholder name"},
	{"order:{header:}", "at offset 6: empty placeholder name"},
	{"order:}", "at offset 6: '}' without a matching '{'"},
	{"order:{id}}", "at offset 10: '}' without a matching '{'"},
	{"{a}:{a}", `at offset 4: duplicate placeholder {a} (first at offset 0)`},
	{"{path:a}:{a}", `at offset 9: duplicate placeholder {a}`},
	{"{header:X-Tenant}:{header:x-tenant}", `at offset 18: duplicate placeholder {header:x-tenant}`},
	{"{cookie:sid}", `at offset 1: unknown source "cookie"`},
	{"{Path:a}", `at offset 1: unknown source "Path"`},
	{"{1a}", `at offset 0: bad path name "1a": not a Go identifier`},
	{"{a-b}", `at offset 0: bad path name "a-b": not a Go identifier`},
	{"{a...}", `at offset 0: bad path name "a...": not a Go identifier`},
	{"{header:X Tenant}", `at offset 0: bad header name "X Tenant": not an HTTP token`},
	{"{header:a:b}", `bad header name "a:b": not an HTTP token`},
	{"{query:a b}", `at offset 0: bad query name "a b": not printable ASCII`},
	{"order {id}", "at offset 5: byte 0x20 not allowed in literal text"},
	{"order:\x00{id}", "at offset 6: byte 0x00 not allowed"},
	{"caf\xc3\xa9:{id}", "at offset 3: byte 0xc3 not allowed"},
	{"{a}{b}", "at offset 3: placeholder {b} follows {a} without a separator"},
	{"{a}%{b}", "at offset 4: placeholder {b} follows {a} without a separator"},
	{"{a}-x_y.z~0%{b}", "at offset 12: placeholder {b} follows {a} without a separator"},
	{strings.Repeat("x", MaxLen+1), "longer than 1024 bytes"},
}

func TestParseError(t *testing.T) {
	for _, tc := range parseErrorTests {
		tpl, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error containing %q", tc.in, tpl, tc.contains)
			continue
		}
		if !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("Parse(%q) error:\n got %q\nwant it to contain %q", tc.in, err, tc.contains)
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error %v does not match ErrSyntax", tc.in, err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Template != tc.in {
			t.Errorf("Parse(%q) error %#v is not a *SyntaxError for the input", tc.in, err)
		}
	}
}

var parseTests = []struct {
	in   string
	want []Placeholder
}{
	{"global", nil},
	{"order:{orderId}", []Placeholder{{Path, "orderId"}}},
	{"order:{path:orderId}", []Placeholder{{Path, "orderId"}}},
	{"{_x}", []Placeholder{{Path, "_x"}}},
	{"{größe}", []Placeholder{{Path, "größe"}}},
	{"tenant:{header:X-Tenant}:cart:{cart}", []Placeholder{{Header, "X-Tenant"}, {Path, "cart"}}},
	{"report:{query:month}/{query:page[size]}", []Placeholder{{Query, "month"}, {Query, "page[size]"}}},
	{"{query:a:b}", []Placeholder{{Query, "a:b"}}},
	{"{a}:{b}", []Placeholder{{Path, "a"}, {Path, "b"}}},
	{"{a}x/y{b}", []Placeholder{{Path, "a"}, {Path, "b"}}},
}

func TestParse(t *testing.T) {
	for _, tc := range parseTests {
		tpl, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := tpl.Placeholders(); !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q).Placeholders() = %v, want %v", tc.in, got, tc.want)
		}
		if got := tpl.String(); got != tc.in {
			t.Errorf("Parse(%q).String() = %q", tc.in, got)
		}
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		tmpl string
		vals map[string]string
		want string
	}{
		{"order:{orderId}", map[string]string{"orderId": "42"}, "order:42"},
		{"order:{a}:{b}", map[string]string{"a": "1:2", "b": "3"}, "order:1%3A2:3"},
		{"order:{a}:{b}", map[string]string{"a": "1", "b": "2:3"}, "order:1:2%3A3"},
		{"k:{a}", map[string]string{"a": "50%"}, "k:50%25"},
		{"k:{a}", map[string]string{"a": "{tag}"}, "k:%7Btag%7D"},
		{"k:{a}", map[string]string{"a": "a b\x00\r\nc"}, "k:a%20b%00%0D%0Ac"},
		{"k:{a}", map[string]string{"a": "é/ü"}, "k:%C3%A9%2F%C3%BC"},
		{"k:{a}", map[string]string{"a": "AZaz09-._~"}, "k:AZaz09-._~"},
		{"constant", nil, "constant"},
	}
	for _, tc := range tests {
		tpl := MustParse(tc.tmpl)
		got, err := tpl.Key(func(p Placeholder) string { return tc.vals[p.Name] })
		if err != nil || got != tc.want {
			t.Errorf("%q with %v = %q, %v; want %q", tc.tmpl, tc.vals, got, err, tc.want)
		}
	}

	tpl := MustParse("order:{a}:{b}")
	_, err := tpl.Key(func(p Placeholder) string {
		if p.Name == "a" {
			return "1"
		}
		return ""
	})
	var ve *ValueError
	if !errors.Is(err, ErrEmptyValue) || !errors.As(err, &ve) || ve.Placeholder != (Placeholder{Path, "b"}) {
		t.Errorf("empty b: err = %v, want a *ValueError for {b} matching ErrEmptyValue", err)
	}
	if want := "keytmpl: {b}: empty value"; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
}

func TestRequestKey(t *testing.T) {
	type result struct {
		key string
		err error
	}
	route := func(pattern, tmpl string) func(*http.Request) result {
		tpl := MustParse(tmpl)
		mux := http.NewServeMux()
		var got result
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			got.key, got.err = tpl.RequestKey(r)
		})
		return func(r *http.Request) result {
			got = result{err: errors.New("handler not called")}
			mux.ServeHTTP(httptest.NewRecorder(), r)
			return got
		}
	}

	pay := route("POST /orders/{orderId}/pay", "order:{orderId}")
	if got := pay(httptest.NewRequest("POST", "/orders/42/pay", nil)); got.err != nil || got.key != "order:42" {
		t.Errorf("POST /orders/42/pay: %q, %v; want order:42", got.key, got.err)
	}
	// net/http unescapes the path value; the key escapes it again.
	if got := pay(httptest.NewRequest("POST", "/orders/4%3A2%2F1/pay", nil)); got.err != nil || got.key != "order:4%3A2%2F1" {
		t.Errorf("escaped path value: %q, %v", got.key, got.err)
	}

	mixed := route("GET /carts/{cart}", "t:{header:X-Tenant}:{cart}:{query:v}")
	r := httptest.NewRequest("GET", "/carts/c1?v=7&v=8", nil)
	r.Header.Add("x-tenant", "acme:eu")
	r.Header.Add("X-Tenant", "other")
	if got := mixed(r); got.err != nil || got.key != "t:acme%3Aeu:c1:7" {
		t.Errorf("header+path+query: %q, %v; want t:acme%%3Aeu:c1:7", got.key, got.err)
	}
	if got := mixed(httptest.NewRequest("GET", "/carts/c1?v=7", nil)); !errors.Is(got.err, ErrEmptyValue) {
		t.Errorf("missing header: %q, %v; want ErrEmptyValue", got.key, got.err)
	}

	rest := route("GET /files/{path...}", "file:{path}")
	if got := rest(httptest.NewRequest("GET", "/files/a/b", nil)); got.err != nil || got.key != "file:a%2Fb" {
		t.Errorf("rest wildcard: %q, %v", got.key, got.err)
	}
	if got := rest(httptest.NewRequest("GET", "/files/", nil)); !errors.Is(got.err, ErrEmptyValue) {
		t.Errorf("empty rest wildcard: %q, %v; want ErrEmptyValue", got.key, got.err)
	}

	wrong := route("POST /orders/{id}/pay", "order:{orderId}")
	if got := wrong(httptest.NewRequest("POST", "/orders/42/pay", nil)); !errors.Is(got.err, ErrNotInRoute) {
		t.Errorf("template names a wildcard the route lacks: %q, %v; want ErrNotInRoute", got.key, got.err)
	}

	tpl := MustParse("order:{orderId}")
	if _, err := tpl.RequestKey(httptest.NewRequest("POST", "/orders/42/pay", nil)); !errors.Is(err, ErrNotInRoute) {
		t.Errorf("unrouted request: %v, want ErrNotInRoute", err)
	}
	hand := httptest.NewRequest("POST", "/orders/42/pay", nil)
	hand.SetPathValue("orderId", "42")
	if key, err := tpl.RequestKey(hand); err != nil || key != "order:42" {
		t.Errorf("SetPathValue request: %q, %v", key, err)
	}
}

func TestSource(t *testing.T) {
	for s, want := range map[Source]string{Path: "path", Header: "header", Query: "query", 7: "Source(7)", -1: "Source(-1)"} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseErrorTests {
		f.Add(tc.in)
	}
	for _, tc := range parseTests {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(s) || se.Template != s {
				t.Fatalf("Parse(%q) error %#v: want a *SyntaxError with an offset in [0, %d]", s, err, len(s))
			}
			return
		}
		if got := tpl.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q", s, got)
		}
		again, err := Parse(tpl.String())
		if err != nil || !slices.Equal(again.Placeholders(), tpl.Placeholders()) || !slices.Equal(again.lits, tpl.lits) {
			t.Fatalf("reparse of %q: %v", tpl, err)
		}
	})
}

// split cuts s into n values, at cut points taken from lens.
func split(s string, lens []byte, n int) []string {
	vals := make([]string, n)
	for i := range n - 1 {
		k := len(s) / 2
		if i < len(lens) {
			k = int(lens[i]) % (len(s) + 1)
		}
		vals[i], s = s[:k], s[k:]
	}
	if n > 0 {
		vals[n-1] = s
	}
	return vals
}

// decode splits a key of t back into its values, the way the package doc
// argues it can: each value ends where the next literal's first separator
// byte shows. It proves Key injective by being its left inverse.
func decode(t *Template, key string) ([]string, bool) {
	rest, ok := strings.CutPrefix(key, t.lits[0])
	if !ok {
		return nil, false
	}
	n := len(t.phs)
	vals := make([]string, n)
	for i := range n {
		next := t.lits[i+1]
		var end int
		if i == n-1 {
			end = len(rest) - len(next)
		} else {
			sep := strings.IndexFunc(next, func(r rune) bool { return separates(string(r)) })
			at := strings.IndexFunc(rest, func(r rune) bool { return separates(string(r)) })
			end = at - sep
		}
		if end < 0 || end > len(rest) {
			return nil, false
		}
		v, err := url.PathUnescape(rest[:end])
		if err != nil {
			return nil, false
		}
		vals[i] = v
		if rest, ok = strings.CutPrefix(rest[end:], next); !ok {
			return nil, false
		}
	}
	return vals, rest == ""
}

func FuzzKeyInjective(f *testing.F) {
	f.Add("order:{a}:{b}", []byte{3, 1}, "1:23", "12:3")
	f.Add("order:{a}:{b}", []byte{1, 3}, "1:23", "1:23")
	f.Add("{a}:{b}/{c}", []byte{2, 1, 0, 4}, "%3A:x/y", "%3A:x/y")
	f.Add("k:{a}", []byte{}, "%", "%25")
	f.Add("k:{a}", []byte{}, "{x}", "%7Bx%7D")
	f.Add("{a}:x:{b}", []byte{1, 2}, "1:x:2", "1:x:2")
	f.Add("{a}a:b{b}c", []byte{1, 2}, "xa:by", "x:a:by")
	f.Add("{header:X-A}|{query:q}", []byte{5}, "\x00\xff\x7f", "é")
	f.Fuzz(func(t *testing.T, tmpl string, lens []byte, x, y string) {
		tpl, err := Parse(tmpl)
		if err != nil {
			return
		}
		n := len(tpl.phs)
		vx := split(x, lens, n)
		vy := split(y, lens[min(n, len(lens)):], n)
		fill := func(vals []string) (string, error) {
			i := 0
			return tpl.Key(func(Placeholder) string { i++; return vals[i-1] })
		}
		kx, errx := fill(vx)
		ky, erry := fill(vy)
		if slices.Contains(vx, "") != (errx != nil) || slices.Contains(vy, "") != (erry != nil) {
			t.Fatalf("%q: empty values %q / %q gave errors %v / %v", tmpl, vx, vy, errx, erry)
		}
		if errx != nil || erry != nil {
			return
		}
		if (kx == ky) != slices.Equal(vx, vy) {
			t.Fatalf("%q: values %q -> %q and %q -> %q", tmpl, vx, kx, vy, ky)
		}
		for _, c := range []struct {
			key  string
			vals []string
		}{{kx, vx}, {ky, vy}} {
			if got, ok := decode(tpl, c.key); !ok || !slices.Equal(got, c.vals) {
				t.Fatalf("%q: key %q decodes to %q, %v; want %q", tmpl, c.key, got, ok, c.vals)
			}
			for i := 0; i < len(c.key); i++ {
				if b := c.key[i]; b < 0x21 || b > 0x7e || b == '{' || b == '}' {
					t.Fatalf("%q: key %q holds byte %#02x", tmpl, c.key, b)
				}
			}
		}
	})
}
