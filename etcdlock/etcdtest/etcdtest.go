// Package etcdtest is a test helper: it starts real etcd servers, embedded
// in the test process, on free loopback ports in a temporary directory: one
// member for most tests, three for the fault tests. It also runs a loopback
// TCP proxy that can cut a client off from its server, to simulate a
// network partition, and, with WithPartitions, cuts links between members.
//
// It is exported so that the tests of other modules (the dlock command's)
// can run against a real etcd; it is not meant for programs. Only a program
// that imports it pulls in the etcd server: package etcdlock does not.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// StartTimeout bounds how long a cluster may take to elect a leader.
const StartTimeout = 30 * time.Second

// Cluster is a set of embedded etcd members that form one cluster.
type Cluster struct {
	members []*member
	token   string
	peers   *peerNet // with WithPartitions
}

type member struct {
	name      string
	dir       string
	peerURL   url.URL // advertised: with WithPartitions, its proxy's
	listenURL url.URL // where the member listens for its peers
	clientURL url.URL
	mu        sync.Mutex
	etcd      *embed.Etcd // nil while stopped
	id        string      // its member id, once started
}

// Start starts a one-member cluster that is stopped when t ends.
func Start(t testing.TB) *Cluster { return StartN(t, 1) }

// StartN starts an n-member cluster that is stopped when t ends.
func StartN(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c, err := New(t.TempDir(), n, opts...)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// New starts an n-member cluster with its data under dir. The caller stops
// it with Close. Ports come from the kernel (":0" on 127.0.0.1); a port
// taken by someone else between choosing and binding is retried.
func New(dir string, n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("etcdtest: a cluster needs at least one member")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var c *Cluster
		c, err = start(fmt.Sprintf("%s/try%d", dir, attempt), n, o)
		if err == nil {
			return c, nil
		}
	}
	return nil, err
}

func start(dir string, n int, o options) (*Cluster, error) {
	c := &Cluster{token: "dlock-" + strings.ReplaceAll(dir, "/", "-")}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	if o.partitions {
		c.peers = newPeerNet(c)
	}
	var initial []string
	for i := 0; i < n; i++ {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			dir:       fmt.Sprintf("%s/m%d", dir, i),
			peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		m.listenURL = m.peerURL
		if c.peers != nil {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				c.peers.close()
				return nil, fmt.Errorf("etcdtest: peer proxy: %w", err)
			}
			m.peerURL.Host = ln.Addr().String()
			c.peers.listen(i, ln, m.listenURL.Host)
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	errc := make(chan error, n)
	for _, m := range c.members {
		go func() { errc <- m.start(strings.Join(initial, ","), c.token, "new") }()
	}
	for range c.members {
		if e := <-errc; e != nil {
			err = errors.Join(err, e)
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (m *member) start(initial, token, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.listenURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = token
	cfg.ClusterState = state
	// Fast elections: a 50 ms heartbeat and a 500 ms election timeout, so
	// that a failover takes well under a second on loopback.
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.UnsafeNoFsync = true
	// The cheapest password hash bcrypt allows: at the default cost a
	// login takes seconds under the race detector.
	cfg.BcryptCost = 4
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: start %s: %w", m.name, err)
	case <-time.After(StartTimeout):
		e.Close()
		return fmt.Errorf("etcdtest: %s not ready after %v", m.name, StartTimeout)
	}
	m.mu.Lock()
	m.etcd, m.id = e, e.Server.MemberID().String()
	m.mu.Unlock()
	return nil
}

// memberByID returns the index of the member whose id is id, or -1.
func (c *Cluster) memberByID(id string) int {
	for i, m := range c.members {
		m.mu.Lock()
		mid := m.id
		m.mu.Unlock()
		if id != "" && mid == id {
			return i
		}
	}
	return -1
}

// Close stops every member. It is safe to call more than once.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for i := range c.members {
		wg.Go(func() { c.Stop(i) })
	}
	wg.Wait()
	if c.peers != nil {
		c.peers.close()
	}
}

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints returns the client URLs of every member, stopped ones included.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL.String())
	}
	return eps
}

// Endpoint returns the client URL of member i.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL.String() }

// Stop stops member i and keeps its data, so that Restart can bring it
// back. Stopping a stopped member does nothing.
func (c *Cluster) Stop(i int) {
	m := c.members[i]
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts member i again on its old ports and data after Stop.
func (c *Cluster) Restart(i int) error {
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	return c.members[i].start(strings.Join(initial, ","), c.token, "existing")
}

// Leader returns the index of the member that leads, waiting for an
// election when there is none, until ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, m := range c.members {
			m.mu.Lock()
			e := m.etcd
			m.mu.Unlock()
			if e != nil && e.Server.Leader() == e.Server.MemberID() {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// ClientConfig returns a client configuration for endpoints (every member
// when none is given) that reconnects quickly, as tests of failures want.
func (c *Cluster) ClientConfig(endpoints ...string) clientv3.Config {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	return ClientConfig(endpoints...)
}

// ClientConfig returns a quiet client configuration for endpoints that
// reconnects within about a second after a failure.
func ClientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	}
}

// Client returns a client of the cluster that is closed when t ends.
func (c *Cluster) Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(c.ClientConfig(endpoints...))
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
