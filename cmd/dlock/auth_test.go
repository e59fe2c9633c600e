package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"github.com/dlock-go/dlock/internal/redistest"
)

// A wrong password or a database that does not exist is not "cannot
// reach": Redis answered, and said no. The first is an authentication
// error (exit 77), the second a configuration error (exit 78).
func TestRedisAuthAndConfigErrors(t *testing.T) {
	locked := redistest.StartConfig(t, redistest.Config{Password: "s3cret"})
	for _, tc := range []struct {
		url  string
		code int
		say  string
	}{
		{"redis://:wrong@" + locked.Addr(), exitNoPerm, "refused the login"},
		{"redis://" + locked.Addr(), exitNoPerm, "refused the login"},
		{"redis://" + srv.Addr() + "/99", exitConfig, "refused the configuration"},
	} {
		for _, args := range [][]string{{"status", "--redis", tc.url, "k"}, {"run", "--redis", tc.url, "k", "--", "true"}} {
			res := dlockIn(t, args)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.say) || strings.Contains(res.stderr, "s3cret") {
				t.Errorf("dlock %q: exit %d, stderr %q; want exit %d saying %q", args, res.code, res.stderr, tc.code, tc.say)
			}
		}
	}
	if res := dlockIn(t, []string{"status", "--redis", "redis://:s3cret@" + locked.Addr(), "k"}); res.code != 0 {
		t.Fatalf("the right password: exit %d, %s", res.code, res.stderr)
	}
}

// etcd with authentication on: a wrong password, or none, is refused as a
// login (exit 77); the right one, from --etcd-user or DLOCK_ETCD_USER and
// DLOCK_ETCD_PASSWORD, works.
func TestEtcdAuth(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	ep := c.Endpoint(0)
	for _, tc := range []struct {
		args []string
		vars []string
		code int
	}{
		{[]string{"status", "--etcd", ep, "--etcd-user", "root:wrong", "k"}, nil, exitNoPerm},
		{[]string{"status", "--etcd", ep, "k"}, nil, exitNoPerm},
		{[]string{"status", "--etcd", ep, "--etcd-user", "root", "k"}, []string{"DLOCK_ETCD_PASSWORD=wrong"}, exitNoPerm},
		{[]string{"status", "--etcd", ep, "--etcd-user", "root:s3cret", "k"}, nil, 0},
		{[]string{"status", "--etcd", ep, "k"}, []string{"DLOCK_ETCD_USER=root", "DLOCK_ETCD_PASSWORD=s3cret"}, 0},
		{[]string{"run", "--etcd", ep, "--etcd-user", "root:s3cret", "k", "--", "true"}, nil, 0},
	} {
		res := dlockIn(t, tc.args, tc.vars...)
		if res.code != tc.code || tc.code == exitNoPerm && !strings.Contains(res.stderr, "refused the login") || strings.Contains(res.stderr, "s3cret") {
			t.Errorf("dlock %q %q: exit %d, stderr %q; want exit %d", tc.args, tc.vars, res.code, res.stderr, tc.code)
		}
	}
}

// The TLS files of etcd are read before connecting: a missing file, or a
// certificate without its key, is a usage error that names the file.
func TestEtcdTLSFlags(t *testing.T) {
	ep := etcdSrv.Endpoint(0)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	for _, args := range [][]string{
		{"status", "--etcd", ep, "--etcd-cacert", missing, "k"},
		{"status", "--etcd", ep, "--etcd-cert", missing, "--etcd-key", missing, "k"},
		{"status", "--etcd", ep, "--etcd-cert", missing, "k"},
	} {
		res := dlockIn(t, args)
		if res.code != exitUsage || !strings.Contains(res.stderr, "etcd") || !strings.Contains(res.stderr, "--etcd-") {
			t.Errorf("dlock %q: exit %d, stderr %q; want a usage error naming the flag", args, res.code, res.stderr)
		}
	}
}

// A malformed ls pattern is one usage error, the same on both stores, and
// needs no server.
func TestLsBadPatternSameEverywhere(t *testing.T) {
	var got []result
	for _, store := range [][]string{{"--redis", "redis://127.0.0.1:1"}, {"--etcd", "127.0.0.1:1"}} {
		got = append(got, dlockIn(t, append(append([]string{"ls"}, store...), "a[")))
	}
	if got[0].code != exitUsage || got[0] != got[1] || !strings.Contains(got[0].stderr, "unclosed [") {
		t.Fatalf("ls a[ on Redis: %+v; on etcd: %+v; want the same usage error", got[0], got[1])
	}
}
