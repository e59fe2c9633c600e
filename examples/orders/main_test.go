package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redistest"
)

func TestDemo(t *testing.T) {
	s := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, "", s.Addr(), &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, &out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "200 OK: paid order 42") || !strings.Contains(lines[1], "409 Conflict (Retry-After: ") {
		t.Fatalf("demo printed:\n%s\nwant one 200 and one 409 with Retry-After", &out)
	}
}
