package main

import (
	"context"
	"flag"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := dlockIn(t, args)
		if res.code != 0 || !regexp.MustCompile(`^dlock \S+ .*go\d.* \w+/\w+\n$`).MatchString(res.stdout) {
			t.Errorf("dlock %q: exit %d, stdout %q", args, res.code, res.stdout)
		}
	}
	if res := dlockProc(t, "version"); res.code != 0 || !strings.HasPrefix(res.stdout, "dlock ") {
		t.Errorf("binary: dlock version: exit %d, stdout %q", res.code, res.stdout)
	}
}

func TestHelp(t *testing.T) {
	res := dlockIn(t, []string{"help"})
	if res.code != 0 || !strings.Contains(res.stdout, "usage: dlock COMMAND") {
		t.Fatalf("help: exit %d, stdout %q", res.code, res.stdout)
	}
	res = dlockIn(t, []string{"help", "run"})
	for _, want := range []string{"usage: dlock run [flags] KEY -- CMD", "-conflict-exit-code", "-kill-grace", "DLOCK_FENCE", "127 CMD not found"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("help run lacks %q", want)
		}
	}
	if res := dlockIn(t, []string{"run", "-h"}); res.code != 0 || !strings.Contains(res.stdout, "usage: dlock run") {
		t.Errorf("run -h: exit %d, stdout %q", res.code, res.stdout)
	}
}

// Usage errors exit 2 with a message on stderr, and touch nothing.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "usage: dlock COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run"}, "missing KEY"},
		{[]string{"run", "k"}, "missing CMD"},
		{[]string{"run", "k", "--"}, "missing CMD"},
		{[]string{"run", "--bogus", "k", "--", "true"}, "unknown flag --bogus"},
		{[]string{"run", "k", "--ttl", "5s", "true"}, "put flags before KEY"},
		{[]string{"run", "k", "extra", "--", "true"}, `unexpected argument "extra" before --`},
		{[]string{"run", "--ttl", "0", "k", "--", "true"}, "--ttl 0s: must be at least 100ms"},
		{[]string{"run", "--ttl", "-1s", "k", "--", "true"}, "--ttl -1s"},
		{[]string{"run", "--ttl", "soon", "k", "--", "true"}, "--ttl soon: want a duration"},
		{[]string{"run", "--wait", "-1s", "k", "--", "true"}, "must not be negative"},
		{[]string{"run", "--wait", "later", "k", "--", "true"}, "forever"},
		{[]string{"run", "--kill-grace", "-1s", "k", "--", "true"}, "--kill-grace"},
		{[]string{"run", "--conflict-exit-code", "300", "k", "--", "true"}, "0 to 255"},
		{[]string{"run", "--prefix", "a{b", "k", "--", "true"}, "brace"},
		{[]string{"run", "", "--", "true"}, "empty key"},
		{[]string{"run", "--redis", "http://127.0.0.1", "k", "--", "true"}, `unknown URL scheme "http": want redis://`},
		{[]string{"run", "--redis", "127.0.0.1:6379", "k", "--", "true"}, "missing scheme"},
		{[]string{"run", "--redis", "redis://u:hunter2@127.0.0.1:port", "k", "--", "true"}, "bad Redis URL redis://u:xxxxx@127.0.0.1:port"},
		{[]string{"run", "--redis", "redis+sentinel://127.0.0.1:26379", "k", "--", "true"}, "master_name"},
		{[]string{"run", "--redis", "redis://127.0.0.1?nonsense=1", "k", "--", "true"}, "nonsense"},
		{[]string{"status"}, "missing KEY"},
		{[]string{"status", "a", "b"}, `unexpected argument "b"`},
		{[]string{"unlock", "k"}, "without --force"},
		{[]string{"unlock", "--force"}, "missing KEY"},
		{[]string{"ls", "a", "b"}, `unexpected argument "b"`},
		{[]string{"version", "x"}, `unexpected argument "x"`},
		{[]string{"demo", "x"}, `unexpected argument "x"`},
	} {
		res := dlockIn(t, tc.args)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
		if strings.Contains(res.stderr, "hunter2") {
			t.Errorf("dlock %q echoed the password: %q", tc.args, res.stderr)
		}
		if strings.Contains(res.stderr, "goroutine ") || strings.Contains(res.stderr, "panic") {
			t.Errorf("dlock %q: %q", tc.args, res.stderr)
		}
	}
}

func TestUnreachableServer(t *testing.T) {
	addr := closedPort(t)
	for _, args := range [][]string{
		{"run", "--redis", "redis://" + addr, "k", "--", "true"},
		{"status", "--redis", "redis://:hunter2@" + addr, "k"},
		{"ls", "--redis", "redis://" + addr},
		{"unlock", "--force", "--redis", "redis://" + addr, "k"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			unreachable(t, addr, args)
		})
	}
}

func unreachable(t *testing.T, addr string, args []string) {
	{
		start := time.Now()
		res := dlockIn(t, args, "DLOCK_REDIS_PASSWORD=hunter2")
		line := oneLine(t, res.stderr)
		if res.code != exitUnavailable || !strings.HasPrefix(line, "dlock: cannot reach Redis at "+addr+": ") {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d naming %s", args, res.code, line, exitUnavailable, addr)
		}
		if strings.Contains(line, "hunter2") {
			t.Errorf("dlock %q echoed the password: %q", args, line)
		}
		if d := time.Since(start); d > defaultDialTimeout {
			t.Errorf("dlock %q took %v to give up, over the dial timeout", args, d)
		}
	}
}

func TestRedisURLFromEnvironment(t *testing.T) {
	res := dlockProc(t, "status", "k") // the binary gets DLOCK_REDIS_URL of the test server
	if res.code != 0 {
		t.Fatalf("status with DLOCK_REDIS_URL: exit %d, %q", res.code, res.stderr)
	}
	res = dlockIn(t, []string{"status", "k"}, "DLOCK_REDIS_URL=redis://"+closedPort(t))
	if res.code != exitUnavailable {
		t.Fatalf("status with DLOCK_REDIS_URL of a closed port: exit %d, %q", res.code, res.stderr)
	}
}

// A server that accepts connections and never answers: dlock gives up
// when the dial timeout of the URL passes.
func TestSilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // accept and hold, say nothing
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-ctx.Done(); c.Close() }()
		}
	}()
	start := time.Now()
	res := dlockIn(t, []string{"status", "--redis", "redis://" + l.Addr().String() + "?dial_timeout=1s", "k"})
	line := oneLine(t, res.stderr)
	if res.code != exitUnavailable || !strings.Contains(line, l.Addr().String()) || !strings.Contains(line, "no answer within 1s") {
		t.Fatalf("silent server: exit %d, stderr %q", res.code, line)
	}
	if d := time.Since(start); d < time.Second || d > 4*time.Second {
		t.Errorf("gave up after %v, want about the 1s dial timeout", d)
	}
}

func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url, password string
		check         func(*redisConfig) bool
	}{
		{"redis://127.0.0.1:6380/2", "pw", func(c *redisConfig) bool {
			return c.simple != nil && c.simple.Addr == "127.0.0.1:6380" && c.simple.DB == 2 && c.simple.Password == "pw" && c.simple.TLSConfig == nil && c.dialTimeout == defaultDialTimeout
		}},
		{"redis://u:secret@localhost?dial_timeout=2s", "pw", func(c *redisConfig) bool {
			return c.simple.Addr == "localhost:6379" && c.simple.Username == "u" && c.simple.Password == "secret" && c.dialTimeout == 2*time.Second
		}},
		{"rediss://cache.internal:6380", "", func(c *redisConfig) bool {
			return c.simple.TLSConfig != nil && c.simple.TLSConfig.ServerName == "cache.internal"
		}},
		{"unix:///run/redis.sock?db=3", "", func(c *redisConfig) bool {
			return c.simple.Network == "unix" && c.simple.Addr == "/run/redis.sock" && c.simple.DB == 3
		}},
		{"redis+sentinel://127.0.0.1:26379?master_name=main&addr=127.0.0.1:26380", "pw", func(c *redisConfig) bool {
			return c.failover != nil && c.failover.MasterName == "main" && len(c.failover.SentinelAddrs) == 2 && c.failover.Password == "pw"
		}},
		{"rediss+sentinel://h:26379?master_name=m", "", func(c *redisConfig) bool {
			return c.failover.TLSConfig != nil
		}},
		{"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", "", func(c *redisConfig) bool {
			return c.cluster != nil && strings.Join(c.cluster.Addrs, " ") == "127.0.0.1:7000 127.0.0.1:7001"
		}},
		{"redis://127.0.0.1:7000,redis://127.0.0.1:7001,127.0.0.1:7002", "pw", func(c *redisConfig) bool {
			return c.cluster != nil && len(c.cluster.Addrs) == 3 && c.cluster.Password == "pw" && c.addrs() == "cluster 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"
		}},
	} {
		c, err := parseRedisURL(tc.url, tc.password)
		if err != nil {
			t.Errorf("parseRedisURL(%q): %v", tc.url, err)
			continue
		}
		if !tc.check(c) {
			t.Errorf("parseRedisURL(%q): unexpected options %+v", tc.url, c)
		}
	}
	for _, bad := range []string{"", "redis://h:1,http://h:2", "redis://h:1,h", "redis+nope://h", "redis://h/1/2", "redis://:s3cret@h:x"} {
		_, err := parseRedisURL(bad, "")
		if err == nil {
			t.Errorf("parseRedisURL(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseRedisURL(%q) echoed the password: %v", bad, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:p@h:1/0":              "redis://u:xxxxx@h:1/0",
		"redis://:p@h":                   "redis://:xxxxx@h",
		"redis://u@h":                    "redis://u@h",
		"redis://h?x=a@b":                "redis://h?x=a@b",
		"redis://a:b@h1,rediss://c:d@h2": "redis://a:xxxxx@h1,rediss://c:xxxxx@h2",
		"redis://u:p@ss@h:1":             "redis://u:xxxxx@h:1",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRunArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		key     string
		argv    string
		ttl     time.Duration
		wantErr string
	}{
		{args: []string{"k", "echo", "hi"}, key: "k", argv: "echo hi", ttl: 10 * time.Second},
		{args: []string{"--ttl", "3s", "k", "--", "ls", "-l"}, key: "k", argv: "ls -l", ttl: 3 * time.Second},
		{args: []string{"k", "--ttl", "3s", "--", "ls", "--", "x"}, key: "k", argv: "ls -- x", ttl: 3 * time.Second},
		{args: []string{"k", "echo", "--ttl"}, key: "k", argv: "echo --ttl", ttl: 10 * time.Second},
		{args: []string{}, wantErr: "missing KEY"},
		{args: []string{"--", "true"}, wantErr: "missing KEY"},
		{args: []string{"k", "-x"}, wantErr: "flag -x after KEY"},
	} {
		var c runConfig
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		c.register(fs)
		key, argv, err := parseRunArgs(fs, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseRunArgs(%q): error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || key != tc.key || strings.Join(argv, " ") != tc.argv || c.ttl != tc.ttl {
			t.Errorf("parseRunArgs(%q) = %q, %q, ttl %v, %v", tc.args, key, argv, c.ttl, err)
		}
	}
}

func TestWaitFlag(t *testing.T) {
	for in, want := range map[string]waitFlag{
		"0": {}, "5s": {d: 5 * time.Second}, "1.5": {d: 1500 * time.Millisecond}, "forever": {forever: true}, "2m": {d: 2 * time.Minute},
	} {
		var w waitFlag
		if err := w.Set(in); err != nil || w != want {
			t.Errorf("--wait %s = %+v, %v; want %+v", in, w, err, want)
		}
	}
	for _, bad := range []string{"-1", "-1s", "soon", "NaN", "1e300"} {
		var w waitFlag
		if err := w.Set(bad); err == nil {
			t.Errorf("--wait %s accepted", bad)
		}
	}
}
