package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// viewColumns are the columns of status, ls and top --once, in order.
var viewColumns = []string{"KEY", "KIND", "STATE", "OWNER", "HOLDS", "TTL", "FENCE", "WAITERS"}

// holdEveryKind takes, under a fresh prefix, a lock of an owner, a full
// semaphore, a semaphore with a permit left, a read-write lock with two
// readers and one with a writer. It returns the prefix and the rows that
// status, ls and top must show, without the TTL column.
func holdEveryKind(t *testing.T, locker func(*testing.T, string) dlock.Locker) (string, map[string]string) {
	t.Helper()
	prefix := "view" + driver.NewToken()[:6]
	l := locker(t, prefix)
	sem, rw := l.(dlock.Semaphore), l.(dlock.RWLocker)
	ctx := context.Background()
	ttl := dlock.WithTTL(30 * time.Second)
	fences := map[string]uint64{}
	must := func(key string, lk dlock.Lock, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		fences[key] = max(fences[key], lk.Fence())
	}
	lk, err := l.TryLock(ctx, "deploy", ttl, dlock.WithOwner("release-7"), dlock.WithFencing(true))
	must("deploy", lk, err)
	for range 2 {
		lk, err = sem.TryAcquire(ctx, "encode", 2, ttl, dlock.WithFencing(true))
		must("encode", lk, err)
	}
	lk, err = sem.TryAcquire(ctx, "fetch", 3, ttl, dlock.WithFencing(true))
	must("fetch", lk, err)
	lk, err = rw.TryRLock(ctx, "config", ttl, dlock.WithFencing(true))
	must("config", lk, err)
	lk, err = locker(t, prefix).(dlock.RWLocker).TryRLock(ctx, "config", ttl, dlock.WithFencing(true)) // another reader
	must("config", lk, err)
	lk, err = rw.TryWLock(ctx, "schema", ttl, dlock.WithFencing(true))
	must("schema", lk, err)
	f := func(key string) string { return uintString(fences[key]) }
	return prefix, map[string]string{
		"config": "config rwlock held - 2r " + f("config"),
		"deploy": "deploy lock held release-7 1 " + f("deploy"),
		"encode": "encode semaphore full - 2/2 " + f("encode"),
		"fetch":  "fetch semaphore held - 1/3 " + f("fetch"),
		"schema": "schema rwlock held - 1w " + f("schema"),
	}
}

// tableRows reads a table of status, ls or top: it checks its header and
// returns its rows by key, without the TTL column (checked to be a lease
// of at most 30s) or the WAITERS column.
func tableRows(t *testing.T, what, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, viewColumns) {
		t.Errorf("%s: columns %q, want %q\n%s", what, got, viewColumns, out)
		return nil
	}
	rows := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(viewColumns) {
			t.Errorf("%s: row %q has %d cells, want %d", what, l, len(f), len(viewColumns))
			continue
		}
		if d, err := time.ParseDuration(f[5]); err != nil || d <= 0 || d > 30*time.Second {
			t.Errorf("%s: row %q: TTL %q, want a lease of at most 30s", what, l, f[5])
		}
		rows[f[0]] = strings.Join(append(f[:5:5], f[6]), " ")
	}
	return rows
}

// status, ls and top --once show every kind of hold alike, with the same
// columns; status of a semaphore or read-write lock says held or full.
func TestViewsAgree(t *testing.T) {
	for storeName, store := range topStores(t) {
		t.Run(storeName, func(t *testing.T) {
			prefix, want := holdEveryKind(t, store.locker)
			args := func(a ...string) []string {
				return append(append([]string{a[0], "--prefix", prefix}, store.flags...), a[1:]...)
			}
			check := func(what string, rows map[string]string, keys ...string) {
				t.Helper()
				if len(rows) != len(keys) {
					t.Errorf("%s: rows %q, want those of %q", what, rows, keys)
				}
				for _, k := range keys {
					if rows[k] != want[k] {
						t.Errorf("%s: row %q, want %q", what, rows[k], want[k])
					}
				}
			}
			all := []string{"config", "deploy", "encode", "fetch", "schema"}
			for _, cmd := range [][]string{{"ls"}, {"top", "--once"}} {
				res := dlockIn(t, args(cmd...))
				if res.code != 0 {
					t.Fatalf("%s: exit %d, stderr %q", cmd[0], res.code, res.stderr)
				}
				check(cmd[0], tableRows(t, cmd[0], res.stdout), all...)
			}
			for _, k := range all {
				res := dlockIn(t, args("status", k))
				if res.code != 0 || strings.Contains(res.stdout, "free") || strings.Contains(res.stdout, "never") {
					t.Errorf("status %s: exit %d, stdout %q: a held key said free or never acquired", k, res.code, res.stdout)
				}
				check("status "+k, tableRows(t, "status "+k, res.stdout), k)
			}

			// --json: the same fields in ls and status, named as the columns.
			res := dlockIn(t, args("ls", "--json"))
			var list []map[string]any
			if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || len(list) != len(all) {
				t.Fatalf("ls --json: %v, %q", err, res.stdout)
			}
			for _, obj := range list {
				key, _ := obj["key"].(string)
				for _, c := range viewColumns {
					name := strings.ToLower(c)
					if c == "TTL" {
						name = "ttl_ms"
					}
					if _, ok := obj[name]; !ok && !(c == "OWNER" && key != "deploy") && !(c == "WAITERS" && storeName == "etcd" && key == "deploy") {
						t.Errorf("ls --json: %v has no field %q for the column %s", obj, name, c)
					}
				}
				res := dlockIn(t, args("status", "--json", key))
				var st []map[string]any
				if err := json.Unmarshal([]byte(res.stdout), &st); err != nil || len(st) != 1 {
					t.Errorf("status --json %s: %v, %q; want the row of ls --json", key, err, res.stdout)
					continue
				}
				delete(obj, "ttl_ms")
				delete(st[0], "ttl_ms")
				if a, b := mustJSON(t, obj), mustJSON(t, st[0]); a != b {
					t.Errorf("status --json %s: %s; ls --json: %s", key, b, a)
				}
			}
			byKey := map[string]map[string]any{}
			for _, obj := range list {
				byKey[obj["key"].(string)] = obj
			}
			if s := byKey["encode"]; s["state"] != "full" || s["kind"] != "semaphore" || s["holds"] != 2.0 || s["limit"] != 2.0 {
				t.Errorf("ls --json of a full semaphore: %v", s)
			}
			if s := byKey["config"]; s["state"] != "held" || s["kind"] != "rwlock" || s["holds"] != 2.0 || s["readers"] != 2.0 {
				t.Errorf("ls --json of a read-write lock with two readers: %v", s)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
