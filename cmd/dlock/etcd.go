package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdBackend is a connected etcd client and the Locker over it.
type etcdBackend struct {
	*etcdlock.Locker
	client *clientv3.Client
}

func (b *etcdBackend) name() string { return useEtcd }

func (b *etcdBackend) close() {
	b.Locker.Close()
	b.client.Close()
}

// etcdConfig is the parsed form of --etcd and the etcd environment.
type etcdConfig struct {
	endpoints      []string
	dialTimeout    time.Duration
	user, password string
	tls            *tls.Config // nil: plain connections
}

// parseEtcdConfig reads a comma list of endpoints (HOST:PORT,
// http://HOST:PORT, https://HOST:PORT, unix://PATH or unixs://PATH) and
// the dial timeout ("" for the default).
func parseEtcdConfig(list, dial string) (*etcdConfig, error) {
	cfg := &etcdConfig{dialTimeout: defaultDialTimeout}
	if dial != "" {
		d, err := time.ParseDuration(dial)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("DLOCK_ETCD_DIAL_TIMEOUT=%s: want a positive duration, such as 2s", dial)
		}
		cfg.dialTimeout = d
	}
	for _, ep := range strings.Split(list, ",") {
		ep = strings.TrimSpace(ep)
		if err := checkEndpoint(ep); err != nil {
			return nil, fmt.Errorf("bad etcd endpoint %q: %v; want HOST:PORT, http://HOST:PORT, https://HOST:PORT or unix://PATH", ep, err)
		}
		cfg.endpoints = append(cfg.endpoints, ep)
	}
	return cfg, nil
}

func checkEndpoint(ep string) error {
	if ep == "" {
		return errors.New("empty")
	}
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok {
		_, port, err := net.SplitHostPort(ep)
		if err != nil {
			return errors.New("no port")
		}
		if port == "" {
			return errors.New("empty port")
		}
		return nil
	}
	switch scheme {
	case "unix", "unixs":
		if rest == "" {
			return errors.New("no socket path")
		}
		return nil
	case "http", "https":
		u, err := url.Parse(ep)
		if err != nil {
			return errors.New("not a URL")
		}
		if u.Port() == "" {
			return errors.New("no port")
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return errors.New("only scheme, host and port are allowed")
		}
		return nil
	}
	return fmt.Errorf("unknown scheme %q", scheme)
}

// openEtcd opens the etcd backend, and returns it with the check, a
// linearizable read, that the cluster answers within the dial timeout.
func (b *backendFlags) openEtcd(e *env, name string, opts ...dlock.Option) (backend, func() int, int) {
	list := b.etcd
	if list == "" {
		list = e.getenv("DLOCK_ETCD_ENDPOINTS")
	}
	cfg, err := parseEtcdConfig(list, e.getenv("DLOCK_ETCD_DIAL_TIMEOUT"))
	if err == nil {
		err = b.etcdLogin(e, cfg)
	}
	if err != nil {
		return nil, nil, usageError(e, name, "%v", err)
	}
	where := strings.Join(cfg.endpoints, ",")
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.endpoints,
		DialTimeout: cfg.dialTimeout,
		// Pings find a dead connection while CMD runs; etcd refuses
		// clients that ping more often than every 5s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: cfg.dialTimeout,
		Username:             cfg.user,
		Password:             cfg.password,
		TLS:                  cfg.tls,
		Logger:               zap.NewNop(), // dlock reports failures itself, in one line
	})
	if err != nil {
		return nil, nil, refused(e, useEtcd, where, etcdRefusal(err), err)
	}
	locker, err := etcdlock.New(client, append([]dlock.Option{dlock.WithPrefix(b.prefix)}, opts...)...)
	if err != nil {
		client.Close()
		return nil, nil, usageError(e, name, "%v", trimDlock(err))
	}
	ping := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.dialTimeout)
		defer cancel()
		if _, err := client.Get(ctx, b.prefix+"/lock/", clientv3.WithCountOnly()); err != nil {
			how := etcdRefusal(err)
			if how == noAnswer && cfg.tls != nil {
				if herr := handshakeError(cfg); herr != nil {
					how, err = badTLS, herr
				}
			}
			if how == noAnswer && ctx.Err() != nil {
				err = fmt.Errorf("no answer within %v", cfg.dialTimeout)
			}
			return refused(e, useEtcd, where, how, err)
		}
		return 0
	}
	return &etcdBackend{Locker: locker, client: client}, ping, 0
}

// etcdLogin completes cfg with the login and TLS files of the flags, else
// of the environment. A file that cannot be read is an error naming it.
func (b *backendFlags) etcdLogin(e *env, cfg *etcdConfig) error {
	or := func(flag, name string) string {
		if flag != "" {
			return flag
		}
		return e.getenv(name)
	}
	user := or(b.etcdUser, "DLOCK_ETCD_USER")
	cfg.user, cfg.password, _ = strings.Cut(user, ":")
	if cfg.password == "" {
		cfg.password = e.getenv("DLOCK_ETCD_PASSWORD")
	}
	ca, cert, key := or(b.etcdCA, "DLOCK_ETCD_CACERT"), or(b.etcdCert, "DLOCK_ETCD_CERT"), or(b.etcdKey, "DLOCK_ETCD_KEY")
	secure := slices.ContainsFunc(cfg.endpoints, func(ep string) bool {
		return strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://")
	})
	if ca == "" && cert == "" && key == "" && !secure {
		return nil
	}
	cfg.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("--etcd-cacert: %v", err)
		}
		cfg.tls.RootCAs = x509.NewCertPool()
		if !cfg.tls.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", ca)
		}
	}
	switch {
	case (cert == "") != (key == ""):
		return errors.New("--etcd-cert and --etcd-key go together: give both, or neither")
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("--etcd-cert, --etcd-key: %v", err)
		}
		cfg.tls.Certificates = []tls.Certificate{pair}
	}
	return nil
}

// handshakeError says why a TLS handshake with the endpoints fails, or nil
// if none fails. gRPC only reports that the cluster gave no answer, so
// once dlock's first request has failed, it asks the handshake itself. The
// server's refusal of a client certificate comes after the client's half
// of a TLS 1.3 handshake, so a short read follows it.
func handshakeError(cfg *etcdConfig) error {
	tc := cfg.tls.Clone()
	tc.NextProtos = []string{"h2"} // as gRPC asks
	for _, ep := range cfg.endpoints {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			if u.Scheme != "https" {
				continue
			}
			host = u.Host
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: cfg.dialTimeout}, "tcp", host, tc)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		var verify *tls.CertificateVerificationError
		var op *net.OpError
		if errors.As(err, &verify) || errors.As(err, &op) && op.Op == "remote error" {
			return fmt.Errorf("%s: %w (check --etcd-cacert, --etcd-cert and --etcd-key)", host, err)
		}
	}
	return nil
}

// etcdRefusal classifies the error of the first etcd request.
func etcdRefusal(err error) refusal {
	switch rpctypes.Error(err) {
	case rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthOldRevision:
		return badLogin
	}
	return noAnswer
}
