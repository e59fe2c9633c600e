package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/postgreslock"
)

// TestSQLKey checks that the tracer's key of a statement is the start of
// its text with the white space collapsed, cut at 48 bytes.
func TestSQLKey(t *testing.T) {
	want := func(sql string) string {
		k := strings.Join(strings.Fields(sql), " ")
		if len(k) > 48 {
			k = k[:48] + "…"
		}
		return k
	}
	for _, sql := range []string{
		"", "  ", "SELECT 1", " SELECT\n\t1 ",
		strings.Repeat("x", 47), strings.Repeat("x", 48), strings.Repeat("x", 49),
		strings.Repeat("x", 47) + " y", strings.Repeat("x", 48) + " y", strings.Repeat("x", 48) + "   ",
		"WITH u AS (\n\tUPDATE dlock SET token = ''   WHERE name = $1::text AND token = $2::text",
		postgreslock.Schema,
	} {
		if got := sqlKey(sql); got != want(sql) {
			t.Errorf("sqlKey(%.60q) = %q, want %q", sql, got, want(sql))
		}
	}
}
