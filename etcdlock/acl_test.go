package etcdlock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
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

// startAuth starts a one-member etcd, stopped when t ends, whose clients
// log in with a certificate: the user is the certificate's common name.
// It returns a function that makes the configuration of a client that
// logs in as user. Certificates, not passwords: with a
// password the etcd client logs in again, a password check and a write
// through raft on the server, for each lease keep-alive stream it opens,
// and the driver opens one per renewal; under the race detector and load,
// renewals then come too late.
func startAuth(t *testing.T) func(user string) clientv3.Config {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	writePEM(t, caFile, "CERTIFICATE", ca.der)
	server := ca.issue(t, "etcd", x509.ExtKeyUsageServerAuth)
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writePEM(t, certFile, "CERTIFICATE", server.Certificate[0])
	keyDER, err := x509.MarshalPKCS8PrivateKey(server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	tlsInfo := transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caFile, ClientCertAuth: true}
	var endpoint string
	for range 3 { // a free port can be taken between our probe and etcd's bind
		if endpoint, err = tryStartAuth(t, tlsInfo); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return func(user string) clientv3.Config {
		cfg := etcdtest.ClientConfig(endpoint)
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, user, x509.ExtKeyUsageClientAuth)}, RootCAs: pool, MinVersion: tls.VersionTLS12}
		return cfg
	}
}

func tryStartAuth(t *testing.T, tlsInfo transport.TLSInfo) (string, error) {
	var hosts [2]string
	for i := range hosts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		hosts[i] = l.Addr().String()
		l.Close()
	}
	peer, client := url.URL{Scheme: "http", Host: hosts[0]}, url.URL{Scheme: "https", Host: hosts[1]}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	cfg.ClientTLSInfo = tlsInfo
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

// authEnabled turns authentication on in the etcd that startAuth started,
// with a root user, and adds the user dlock-app of appRole; it returns a
// client of the root user and the configuration of a client of dlock-app.
func authEnabled(t *testing.T, config func(user string) clientv3.Config) (root *clientv3.Client, app clientv3.Config) {
	t.Helper()
	ctx := context.Background()
	root, err := clientv3.New(config("root"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	noPassword := &clientv3.UserAddOptions{NoPassword: true}
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAddWithOptions(ctx, "root", "", noPassword); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, appRole); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, appRole, appPrefix, appRangeEnd, clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAddWithOptions(ctx, "dlock-app", "", noPassword); return err },
		func() error { _, err := root.UserGrantRole(ctx, "dlock-app", appRole); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return root, config("dlock-app")
}

// ca is a certificate authority for the test's server and clients.
type ca struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlock ACL test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, der: der, key: key}
}

// issue returns a certificate for name (its common name), valid on
// 127.0.0.1, for use.
func (c *ca) issue(t *testing.T, name string, use x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{use},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
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
