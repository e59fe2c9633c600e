package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// rtts counts a client's gRPC round trips: one per unary call, and one
// per message sent on a stream (a watch created or cancelled, a lease
// keep-alive).
type rtts struct{ n atomic.Int64 }

func (c *rtts) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.n.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rtts) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return countedStream{s, c}, nil
}

type countedStream struct {
	grpc.ClientStream
	c *rtts
}

func (s countedStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// BenchmarkPrimitives measures one uncontended acquire and release cycle
// of each kind of hold, in its waiting form (Lock, Acquire with a limit of
// 1, WLock, RLock), by one goroutine on the shared cluster: gRPC round
// trips (rtt/op) and etcd revisions, that is Raft writes (revs/op), per
// cycle. The Locker's session is started before the count.
func BenchmarkPrimitives(b *testing.B) {
	for _, bc := range []struct {
		name string
		take func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error)
	}{
		{"lock", func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) { return l.Lock(ctx, key) }},
		{"semaphore", func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.Acquire(ctx, key, 1)
		}},
		{"write", func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.WLock(ctx, key)
		}},
		{"read", func(ctx context.Context, l *etcdlock.Locker, key string) (dlock.Lock, error) {
			return l.RLock(ctx, key)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var counted rtts
			cfg := shared.ClientConfig()
			cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(counted.unary), grpc.WithChainStreamInterceptor(counted.stream))
			cli, err := clientv3.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			l := newLocker(b, cli)
			admin := client(b)
			ctx := context.Background()
			key := "bench:" + bc.name
			cycle := func() {
				lk, err := bc.take(ctx, l, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			revision := func() int64 {
				resp, err := admin.Get(ctx, "bench/revision", clientv3.WithCountOnly())
				if err != nil {
					b.Fatal(err)
				}
				return resp.Header.Revision
			}
			cycle() // starts the session
			counted.n.Store(0)
			rev0 := revision()
			b.ReportAllocs()
			for b.Loop() {
				cycle()
			}
			revs := revision() - rev0
			b.ReportMetric(float64(counted.n.Load())/float64(b.N), "rtt/op")
			b.ReportMetric(float64(revs)/float64(b.N), "revs/op")
		})
	}
}
