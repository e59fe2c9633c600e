package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// dlock speaks TLS to etcd with the files of --etcd-cacert, --etcd-cert and
// --etcd-key: a real handshake, with the server asking for the client's
// certificate. A handshake that fails is exit 77, with its cause. The server here is the test's etcd behind a loopback TLS
// front that requires a client certificate signed by the test's CA.
func TestEtcdTLS(t *testing.T) {
	t.Parallel() // its own servers, keys or prefix; it waits, not computes
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.der)
	serverCert := ca.issue(t, "etcd", x509.ExtKeyUsageServerAuth)
	clientCert := ca.issue(t, "dlock", x509.ExtKeyUsageClientAuth)
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Certificate[0])
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writePEM(t, dir, "client-key.pem", "PRIVATE KEY", keyDER)
	other := newTestCA(t)
	otherFile := writePEM(t, dir, "other-ca.pem", "CERTIFICATE", other.der)

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	front := startTLSFront(t, strings.TrimPrefix(etcdSrv.Endpoint(0), "http://"), &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"},
		MinVersion:   tls.VersionTLS12,
	})
	ep := "https://" + front

	ok := []string{"--etcd", ep, "--etcd-cacert", caFile, "--etcd-cert", certFile, "--etcd-key", keyFile}
	if res := dlockIn(t, append(append([]string{"run"}, ok...), "tls-key", "--", "true")); res.code != 0 {
		t.Fatalf("dlock run over TLS with the right files: exit %d, stderr %q", res.code, res.stderr)
	}
	for _, tc := range []struct {
		why  string
		args []string
		say  string
	}{
		{"no client certificate", []string{"--etcd-cacert", caFile}, "certificate required"},
		{"a CA that did not sign the server's certificate", []string{"--etcd-cacert", otherFile, "--etcd-cert", certFile, "--etcd-key", keyFile}, "unknown authority"},
		{"the system's CAs", []string{"--etcd-cert", certFile, "--etcd-key", keyFile}, "unknown authority"},
	} {
		res := dlockIn(t, append(append([]string{"status", "--etcd", ep}, tc.args...), "tls-key"))
		if res.code != exitNoPerm || !strings.Contains(res.stderr, "TLS handshake with etcd at "+ep) || !strings.Contains(res.stderr, tc.say) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d: the TLS handshake failed, %s", tc.why, res.code, res.stderr, exitNoPerm, tc.say)
		}
	}
	// The same files from the environment.
	env := []string{"DLOCK_ETCD_CACERT=" + caFile, "DLOCK_ETCD_CERT=" + certFile, "DLOCK_ETCD_KEY=" + keyFile}
	if res := dlockIn(t, []string{"status", "--etcd", ep, "tls-key"}, env...); res.code != 0 {
		t.Fatalf("dlock status over TLS with the files from the environment: exit %d, stderr %q", res.code, res.stderr)
	}
}

type testCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
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
	return &testCA{cert: cert, der: der, key: key}
}

// issue signs a certificate for 127.0.0.1 with the given use.
func (ca *testCA) issue(t *testing.T, name string, use x509.ExtKeyUsage) tls.Certificate {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startTLSFront listens on a loopback port with cfg and relays each
// connection, once its handshake is done, to the plain address to. It
// stops when t ends.
func startTLSFront(t *testing.T, to string, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if open == nil {
			return false // stopped
		}
		open = append(open, cs...)
		return true
	}
	open = []net.Conn{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		open = nil
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				back, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer back.Close()
				if !track(c, back) {
					return
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					io.Copy(back, c)
					back.(*net.TCPConn).CloseWrite()
				}()
				_, err = io.Copy(c, back)
				if err != nil && !errors.Is(err, net.ErrClosed) {
					c.Close()
				}
				c.(*tls.Conn).CloseWrite()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}
