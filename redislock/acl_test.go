package redislock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// appRules is the ACL of an application's Redis user under the default
// prefix "dlock": every command the driver sends (the scripts' commands
// included, for Redis checks each call a script makes), on dlock's keys and
// channels only. docs/least-privilege.md gives the same rules to operators.
var appRules = []string{
	"resetkeys", "resetchannels", "-@all",
	// the lock keys, and their siblings, named "{<lock key>}:x", or
	// "{T}:<lock key>:x" when the key has the hash tag T
	"~dlock:*", "~{dlock:*", "~{*}:dlock:*",
	// the wake-up and watch channels, named as the siblings
	"&{dlock:*", "&{*}:dlock:*",
	// the connection
	"+hello", "+ping",
	// scripts, and the MULTI block of Inspect
	"+evalsha", "+eval", "+script|load", "+multi", "+exec",
	// what the scripts and Inspect call
	"+get", "+mget", "+set", "+del", "+exists", "+pttl", "+pexpire", "+pexpireat", "+time",
	"+hget", "+hincrby", "+hmget", "+hset", "+hdel", "+hexists", "+hgetall", "+hkeys", "+hlen",
	"+zadd", "+zcard", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+zscore",
	// wake-ups (sharded pub/sub) and WithReplicaAck's WAIT
	"+ssubscribe", "+sunsubscribe", "+spublish", "+wait",
	// a Cluster client's view of the slots and of the commands' keys
	"+cluster|slots", "+command",
}

// identityRule lets go-redis name itself when it connects (CLIENT SETINFO,
// Redis 7.2 and later; refused, the client goes on without it). Older
// servers know no such command and refuse the rule.
const identityRule = "+client|setinfo"

// operatorRules is what an operator's user has beyond appRules: SCAN, for
// List (`dlock ls`). SCAN walks the whole keyspace and its MATCH pattern is
// the caller's, so it can list every key name of the database, not only
// dlock's: applications do not need it.
var operatorRules = []string{"+scan"}

// aclUser creates user with rules on s (as the default user) and returns
// a function that makes clients logged in as that user, closed when their
// test ends. It empties the server's ACL log first.
func aclUser(t *testing.T, s *redistest.Server, user string, rules ...string) func(t *testing.T) redis.UniversalClient {
	t.Helper()
	password := setUser(t, user, rules, s)
	return func(t *testing.T) redis.UniversalClient {
		opts := s.Options()
		opts.Username, opts.Password = user, password
		c := redis.NewClient(opts)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// setUser creates user with rules and a new password on each of servers,
// as the default user, empties their ACL logs, and returns the password.
func setUser(t *testing.T, user string, rules []string, servers ...*redistest.Server) string {
	t.Helper()
	ctx := context.Background()
	password := "pw-" + keyFor(t)
	for _, s := range servers {
		admin := s.Client(t)
		args := []any{"acl", "setuser", user, "reset", "on", ">" + password}
		for _, r := range rules {
			args = append(args, r)
		}
		// COMMAND INFO answers nil for a command the server does not know.
		if known, err := admin.Do(ctx, "command", "info", "client|setinfo").Slice(); err != nil {
			t.Fatalf("COMMAND INFO: %v", err)
		} else if len(known) == 1 && known[0] != nil {
			args = append(args, identityRule)
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s: %v", user, err)
		}
		if err := admin.Do(ctx, "acl", "log", "reset").Err(); err != nil {
			t.Fatalf("ACL LOG RESET: %v", err)
		}
	}
	return password
}

// refused returns what s's ACL log holds: one line per command, key or
// channel it refused to a user, since the last reset.
func refused(t *testing.T, s *redistest.Server) []string {
	t.Helper()
	entries, err := s.Client(t).Do(context.Background(), "acl", "log", "128").Slice()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	var lines []string
	for _, e := range entries {
		fields, _ := e.(map[any]any) // RESP3 maps
		lines = append(lines, fmt.Sprintf("%v %v %v (%v)", fields["username"], fields["reason"], fields["object"], fields["context"]))
	}
	return lines
}

// An application whose user has only appRules keeps the whole contract:
// locks, waiting with wake-ups, reentrancy, fencing, semaphores, read-write
// locks, multi-key locks, watching, elections, and replica acknowledgement
// (WAIT), and the server refuses it nothing.
func TestACLConformance(t *testing.T) {
	t.Parallel() // its own servers; the suite waits on leases
	m := redistest.Start(t)
	redistest.StartReplica(t, m) // for WithReplicaAck
	newClient := aclUser(t, m, "dlock-app", appRules...)
	// Fenced, the suite runs every script, and the matrix's cells include
	// elections and watches.
	dlocktest.Run(t, harness(newClient, dlocktest.All, dlock.WithFencing(true)))

	// WithReplicaAck sends WAIT after each write.
	ctx := context.Background()
	l := lockerOf(t, newClient(t), dlock.WithFencing(true), WithReplicaAck(1, time.Second))
	lk, err := l.TryLock(ctx, keyFor(t))
	if err != nil {
		t.Fatalf("TryLock with replica acknowledgement: %v", err)
	}
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("Refresh with replica acknowledgement: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock with replica acknowledgement: %v", err)
	}
	if log := refused(t, m); len(log) > 0 {
		t.Errorf("the server refused the application's user:\n%s", strings.Join(log, "\n"))
	}
}

// On a Cluster the application's user needs nothing more: the client
// learns the slots and the commands' keys, and every node refuses it
// nothing.
func TestACLCluster(t *testing.T) {
	t.Parallel() // its own servers; the suite waits on leases
	c := startCluster(t, 3)
	password := setUser(t, "dlock-app", appRules, c.Nodes()...)
	newClient := func(t *testing.T) redis.UniversalClient {
		opts := c.Options()
		opts.Username, opts.Password = "dlock-app", password
		cc := redis.NewClusterClient(opts)
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	dlocktest.Run(t, harness(newClient, dlocktest.All, dlock.WithFencing(true)))
	for i, n := range c.Nodes() {
		if log := refused(t, n); len(log) > 0 {
			t.Errorf("node %d refused the application's user:\n%s", i, strings.Join(log, "\n"))
		}
	}
}

// The application's user may inspect its locks, but List (SCAN) is the
// operator's: an application's user is refused it and learns nothing,
// while an operator's user lists the lock and clears it with ForceUnlock.
func TestACLOperator(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	app := aclUser(t, s, "dlock-app", appRules...)
	op := aclUser(t, s, "dlock-operator", append(appRules, operatorRules...)...)
	key := keyFor(t)

	holder := lockerOf(t, app(t))
	lk, err := holder.TryLock(ctx, key, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	// Inspecting is the application's too (Inspect, InspectKind: `dlock
	// status`).
	for _, k := range []dlock.Kind{dlock.KindLock, dlock.KindSemaphore, dlock.KindRWLock} {
		info, err := lockerOf(t, app(t)).InspectKind(ctx, k, key)
		if err != nil || info.Held != (k == dlock.KindLock) {
			t.Errorf("InspectKind(%v) as the application: %+v, %v", k, info, err)
		}
	}
	if log := refused(t, s); len(log) > 0 {
		t.Fatalf("the server refused the application's user:\n%s", strings.Join(log, "\n"))
	}

	infos, err := lockerOf(t, app(t)).List(ctx, "")
	if !isNoPerm(err) || infos != nil {
		t.Fatalf("List as the application: %v, %v; want a NOPERM error and nothing", infos, err)
	}
	if log := refused(t, s); len(log) != 1 || !strings.Contains(log[0], "dlock-app command scan") {
		t.Errorf("ACL log: %q; want the application's SCAN alone", log)
	}

	operator := lockerOf(t, op(t))
	infos, err = operator.List(ctx, "")
	if err != nil || len(infos) != 1 || infos[0].Key != key || !infos[0].Held {
		t.Fatalf("List as the operator: %+v, %v; want %q held", infos, err, key)
	}
	info, err := operator.ForceUnlock(ctx, key)
	if err != nil || info.Key != key {
		t.Fatalf("ForceUnlock as the operator: %+v, %v", info, err)
	}
	if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the holder's Refresh after ForceUnlock: %v; want ErrNotHeld", err)
	}
	if log := refused(t, s); len(log) != 1 {
		t.Errorf("ACL log: %q; want the application's SCAN alone", log)
	}
}

// isNoPerm reports whether err is Redis's refusal of a command, key or
// channel by the ACL.
func isNoPerm(err error) bool { return err != nil && strings.Contains(err.Error(), "NOPERM") }

// The rules the tests grant are the ones docs/least-privilege.md gives.
func TestACLDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/least-privilege.md")
	if err != nil {
		t.Fatal(err)
	}
	operator := append(append([]string(nil), appRules...), operatorRules...)
	for what, rules := range map[string][]string{"application": appRules, "operator": operator} {
		if line := strings.Join(rules, " "); !strings.Contains(string(doc), line) {
			t.Errorf("docs/least-privilege.md lacks the %s's rules as the tests grant them:\n%s", what, line)
		}
	}
}
