package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
)

// etcdSystems are the systems of part 5: etcd's own Mutex, then dlock's
// etcd driver.
func etcdSystems() []system { return []system{mutexSys{}, etcdlockSys{}} }

// etcdTarget is the embedded etcd cluster c, whose store revision is read
// through admin (a client whose calls are not counted).
func etcdTarget(c *etcdtest.Cluster, admin *clientv3.Client) *target {
	return &target{
		endpoint: func(int) endpoint {
			cfg := etcdtest.ClientConfig(c.Endpoints()...)
			return endpoint{etcd: &cfg}
		},
		stats: func(ctx context.Context) (serverStats, error) {
			resp, err := admin.Get(ctx, "bench/revision", clientv3.WithCountOnly())
			if err != nil {
				return serverStats{}, fmt.Errorf("etcd revision: %w", err)
			}
			return serverStats{calls: map[string]int64{}, rev: resp.Header.Revision}, nil
		},
	}
}

// newEtcdClient connects to the cluster of e with every call counted in
// rtt: a unary call is one round trip, and so is every message sent on a
// stream (a watch created, or cancelled while others stay on the stream: the
// last one closes it instead; a lease keep-alive).
func newEtcdClient(e endpoint, rtt *counter) (*clientv3.Client, error) {
	cfg := *e.etcd
	cfg.DialOptions = append(append([]grpc.DialOption{}, cfg.DialOptions...),
		grpc.WithChainUnaryInterceptor(rtt.unary), grpc.WithChainStreamInterceptor(rtt.stream))
	return clientv3.New(cfg)
}

// unary counts one round trip per call (a retried call counts again).
func (c *counter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.n.Add(1)
	c.cmds.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// stream counts the messages sent on a stream.
func (c *counter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &countedStream{ClientStream: s, c: c}, nil
}

type countedStream struct {
	grpc.ClientStream
	c *counter
}

func (s *countedStream) SendMsg(m any) error {
	s.c.n.Add(1)
	s.c.cmds.Add(1)
	return s.ClientStream.SendMsg(m)
}

// ttlSeconds is ttl in whole seconds, the unit of etcd leases.
func ttlSeconds(ttl time.Duration) int { return int((ttl + time.Second - 1) / time.Second) }

// ---------------------------------------------------------------- etcdlock

// etcdlockSys is dlock's etcd driver with its defaults: locks with the
// Locker's TTL share one session lease, renewed by the Locker.
type etcdlockSys struct{}

func (etcdlockSys) name() string { return "dlock etcdlock" }

func (etcdlockSys) party(e endpoint, rtt *counter) (party, error) {
	cli, err := newEtcdClient(e, rtt)
	if err != nil {
		return nil, err
	}
	l, err := etcdlock.New(cli)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &etcdlockParty{cli: cli, l: l}, nil
}

type etcdlockParty struct {
	cli *clientv3.Client
	l   *etcdlock.Locker
}

func (p *etcdlockParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var opts []dlock.Option
	if ttl != dlock.DefaultTTL {
		opts = append(opts, dlock.WithTTL(ttl))
	}
	var (
		lk  dlock.Lock
		err error
	)
	if wait {
		lk, err = p.l.Lock(ctx, key, opts...)
	} else {
		lk, err = p.l.TryLock(ctx, key, opts...)
	}
	if err != nil {
		return nil, err
	}
	return &dlockLock{lk: lk}, nil
}

func (p *etcdlockParty) close() error { return errors.Join(p.l.Close(), p.cli.Close()) }

// ---------------------------------------------------------------- Mutex

// mutexSys is etcd's own go.etcd.io/etcd/client/v3/concurrency.Mutex: one
// Session (one lease, kept alive by the session) per party, a new Mutex per
// acquisition with the lock's key as its prefix; Lock waits in line (on the
// delete of the key before its own), TryLock makes one attempt.
type mutexSys struct{}

func (mutexSys) name() string { return "etcd concurrency.Mutex" }

func (mutexSys) party(e endpoint, rtt *counter) (party, error) {
	cli, err := newEtcdClient(e, rtt)
	if err != nil {
		return nil, err
	}
	return &mutexParty{cli: cli}, nil
}

// mutexParty starts its session at the first acquisition: a session has
// one TTL.
type mutexParty struct {
	cli *clientv3.Client

	mu  sync.Mutex
	ttl time.Duration
	s   *concurrency.Session
}

func (p *mutexParty) session(ttl time.Duration) (*concurrency.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s != nil {
		if ttl != p.ttl {
			return nil, fmt.Errorf("concurrency: a session of TTL %v asked for %v", p.ttl, ttl)
		}
		return p.s, nil
	}
	s, err := concurrency.NewSession(p.cli, concurrency.WithTTL(ttlSeconds(ttl)))
	if err != nil {
		return nil, err
	}
	p.s, p.ttl = s, ttl
	return s, nil
}

func (p *mutexParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	s, err := p.session(ttl)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, key)
	if wait {
		err = m.Lock(ctx)
	} else {
		err = m.TryLock(ctx)
	}
	if errors.Is(err, concurrency.ErrLocked) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return &mutexLock{m: m, s: s}, nil
}

func (p *mutexParty) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.s != nil {
		err = p.s.Close()
	}
	return errors.Join(err, p.cli.Close())
}

type mutexLock struct {
	m *concurrency.Mutex
	s *concurrency.Session
}

func (l *mutexLock) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }
func (l *mutexLock) keepAlive(time.Duration)          {}

// lost reports whether the session ended: the lease, and the key with it.
func (l *mutexLock) lost() bool {
	select {
	case <-l.s.Done():
		return true
	default:
		return false
	}
}
func (l *mutexLock) redisKey() string { return l.m.Key() }
func (l *mutexLock) value() string    { return "" }
