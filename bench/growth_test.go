package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Part 7 on tiny settings: a row for every backend and size, a figure in
// every cell, and one goal of each kind per backend.
func TestGrowth(t *testing.T) {
	t.Parallel() // each starts servers of its own and runs short windows; none asserts a figure
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.growth = growthConfig{redisMax: 10_000, otherMax: 1000, window: 300 * time.Millisecond, ttl: 3 * time.Second,
		acquire: time.Minute, contenders: []int{2, 8, 16}, hot: 300 * time.Millisecond, backends: growthBackends}
	if testing.Verbose() {
		cfg.log = os.Stderr
	}
	file := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(file, []byte("# results\n\n## 6. before\n\ntext\n\n## Goals\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runGrowth(ctx, cfg, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"## 6. before", growthHeading, "## Goals\n\nkept",
		"| dlock redislock | 1,000 |", "| dlock redislock | 10,000 |", "| dlock etcdlock | 1,000 |", "| dlock postgreslock | 1,000 |",
		"| dlock redislock | 16 |", "| dlock redlock (5 servers) | 16 |", "| dlock etcdlock | 16 |", "| dlock postgreslock | 16 |",
		"dlock redislock: per-lock cost flat from 1,000 to 10,000 held locks", "dlock postgreslock: hand-off cost flat in waiters (16 contenders against 8)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the section has no %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
		t.Errorf("the section has a figure that is not a number:\n%s", md)
	}
	for _, f := range []string{"growth-held.svg", "growth-handoff.svg"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(file), f)); err != nil {
			t.Error(err)
		}
	}
}

// The goal rows of part 7 follow their rules, whatever the figures.
func TestGrowthGoals(t *testing.T) {
	run := &growthRun{cfg: growthConfig{redisMax: 1_000_000, otherMax: 10_000, contenders: []int{2, 8, 256}}}
	w := time.Second
	run.held = []heldGrowth{
		{backend: backRedis, want: 1000, locks: 1000, window: w, client: 2 * time.Millisecond, server: time.Millisecond},
		{backend: backRedis, want: 1_000_000, locks: 1_000_000, window: w, client: 1100 * time.Millisecond, server: 50 * time.Millisecond},
		{backend: backEtcd, want: 1000, locks: 1000, window: w, client: time.Millisecond, server: -1},
		{backend: backEtcd, want: 10_000, locks: 4000, window: w, client: 2 * time.Millisecond, server: -1},
	}
	run.hot = []hotGrowth{
		{backend: backRedis, n: 8, handoffs: 10, requests: 2, server: 10, client: 20},
		{backend: backRedis, n: 256, handoffs: 10, requests: 4, server: 20, client: 90},
		{backend: backEtcd, n: 8, handoffs: 10, requests: 4, server: -1, client: 20},
		{backend: backEtcd, n: 256, handoffs: 10, requests: 4, server: -1, client: 41},
		{backend: backPostgres, n: 8, handoffs: 10, requests: 3, server: 5, client: 5},
		{backend: backPostgres, n: 256, unfinished: true},
	}
	met := map[string]bool{}
	for _, g := range run.goals() {
		met[g.what] = g.met
	}
	for what, want := range map[string]bool{
		// 1.1 µs/s per lock against 2 and 0.05 against 1: flat, but
		// 1.15 cores in all
		"dlock redislock: per-lock cost flat from 1,000 to 1,000,000 held locks, within one core": false,
		// reached 4,000 of 10,000
		"dlock etcdlock: per-lock cost flat from 1,000 to 10,000 held locks, within one core": false,
		"dlock redislock: hand-off cost flat in waiters (256 contenders against 8)":           true,
		// CPU 41 against 20: over 2×
		"dlock etcdlock: hand-off cost flat in waiters (256 contenders against 8)":     false,
		"dlock postgreslock: hand-off cost flat in waiters (256 contenders against 8)": false,
	} {
		got, ok := met[what]
		if !ok {
			t.Errorf("no goal %q among %v", what, met)
			continue
		}
		if got != want {
			t.Errorf("%s: met %v, want %v", what, got, want)
		}
	}
}
