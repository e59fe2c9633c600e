package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// appRole is the etcd role of an application under the default prefix
// "dlock": read and write on the range of keys that start with "dlock/",
// and nothing else. docs/least-privilege.md gives the same commands to
// operators.
const (
	appRole     = "dlock"
	appPrefix   = "dlock/"
	appRangeEnd = "dlock0" // clientv3.GetPrefixRangeEnd(appPrefix): '/' + 1
)

// startAuth starts a one-member etcd, stopped when t ends, that hashes
// passwords at bcrypt's lowest cost (4; etcd's default is 10), and returns
// its client URL. With password logins the etcd client logs in again for
// each lease keep-alive stream, and the driver renews with one stream per
// renewal: at the default cost, under the race detector, a renewal takes
// seconds and the leases run out. The cost is no part of what is tested
// here, which is the role.
func startAuth(t *testing.T) string {
	t.Helper()
	var err error
	for range 3 { // a free port can be taken between our probe and etcd's bind
		var endpoint string
		if endpoint, err = tryStartAuth(t); err == nil {
			return endpoint
		}
	}
	t.Fatalf("start etcd: %v", err)
	return ""
}

func tryStartAuth(t *testing.T) (string, error) {
	var urls [2]url.URL
	for i := range urls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		urls[i] = url.URL{Scheme: "http", Host: l.Addr().String()}
		l.Close()
	}
	peer, client := urls[0], urls[1]
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	cfg.BcryptCost = 4
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return "", err
	case <-time.After(etcdtest.StartTimeout):
		e.Close()
		return "", fmt.Errorf("etcd not ready after %v", etcdtest.StartTimeout)
	}
	t.Cleanup(e.Close)
	return client.String(), nil
}

// authEnabled turns authentication on in the etcd at endpoint, with a root
// user, and adds a user of appRole; it returns a client of the root user
// and the configuration of a client of the application's user.
func authEnabled(t *testing.T, endpoint string) (root *clientv3.Client, app clientv3.Config) {
	t.Helper()
	ctx := context.Background()
	cli, err := clientv3.New(etcdtest.ClientConfig(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const rootPassword, appPassword = "root-secret", "app-secret"
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, appRole); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, appRole, appPrefix, appRangeEnd, clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "dlock-app", appPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "dlock-app", appRole); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	rootCfg := etcdtest.ClientConfig(endpoint)
	rootCfg.Username, rootCfg.Password = "root", rootPassword
	root, err = clientv3.New(rootCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	app = etcdtest.ClientConfig(endpoint)
	app.Username, app.Password = "dlock-app", appPassword
	return root, app
}

// An application whose etcd user has only appRole keeps the whole
// contract; the role lets it read nothing outside its
// range.
func TestACLConformance(t *testing.T) {
	if got := clientv3.GetPrefixRangeEnd(appPrefix); got != appRangeEnd {
		t.Fatalf("range end of %q: %q, not %q", appPrefix, got, appRangeEnd)
	}
	root, appCfg := authEnabled(t, startAuth(t))
	cli, err := clientv3.New(appCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := root.Put(ctx, "other/key", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "other/key"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("the application's Get outside its range: %v; want permission denied", err)
	}

	h := dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := etcdlock.New(cli, opts...)
			if err != nil {
				t.Fatalf("etcdlock.New: %v", err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) {
			l, err := etcdlock.New(root)
			if err != nil {
				t.Fatalf("etcdlock.New: %v", err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := root.Delete(ctx, l.RangeOf(key), clientv3.WithPrefix()); err != nil {
				t.Fatalf("delete %q: %v", l.RangeOf(key), err)
			}
		},
		MinTTL: time.Second,
	}
	h.Caps = dlocktest.All
	dlocktest.Run(t, h) // elections and watches included
}

// Inspect, List and ForceUnlock need no more than the role: etcd cannot
// tell an operator's command from an application's on the same range.
func TestACLOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, appCfg := authEnabled(t, startAuth(t))
	cli, err := clientv3.New(appCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	holder, operator := newLocker(t, cli), newLocker(t, cli)
	lk, err := holder.TryLock(ctx, "job", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := operator.List(ctx, "")
	if err != nil || len(infos) != 1 || infos[0].Key != "job" || !infos[0].Held {
		t.Fatalf("List: %+v, %v; want job held", infos, err)
	}
	if _, err := operator.ForceUnlock(ctx, "job"); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	select {
	case <-lk.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told that its lock was taken")
	}
}

// The role the tests grant is the one docs/least-privilege.md gives.
func TestACLDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/least-privilege.md")
	if err != nil {
		t.Fatal(err)
	}
	line := "etcdctl role grant-permission " + appRole + " readwrite " + appPrefix + " " + appRangeEnd
	if !strings.Contains(string(doc), line) {
		t.Errorf("docs/least-privilege.md lacks the role as the tests grant it:\n%s", line)
	}
}
