package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// faultyKV fails a client's calls on demand: the next Txn (failTxn: not
// sent), the next DeleteRange (dropDelete: done, its reply lost), and
// every other DeleteRange while deletes are held back; it counts the
// deletes that reached etcd and were answered. Its errors are ones the
// etcd client does not retry.
type faultyKV struct {
	failTxn    atomic.Bool
	dropDelete atomic.Bool
	noDeletes  atomic.Bool
	deleted    atomic.Int64
}

func (f *faultyKV) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case "/etcdserverpb.KV/Txn":
		if f.failTxn.CompareAndSwap(true, false) {
			return status.Error(codes.Unavailable, "faultyKV: not sent")
		}
	case "/etcdserverpb.KV/DeleteRange":
		if f.dropDelete.CompareAndSwap(true, false) {
			if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "faultyKV: reply lost")
		}
		if f.noDeletes.Load() {
			return status.Error(codes.Unavailable, "faultyKV: delete held back")
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			f.deleted.Add(1)
		}
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A release whose reply is lost leaves its key to a delete in the
// background, although etcd did delete it; until that delete lands, the
// Locker's next hold of the key must not reuse the key's name, or the late
// delete would delete the new hold.
func TestNameNotReusedWhileDeletePending(t *testing.T) {
	t.Parallel()
	var f faultyKV
	cli := faultyClient(t, f.unary)
	l := newLocker(t, cli, dlock.WithTTL(time.Hour))
	admin := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "names:pending:" + driver.NewToken()[:6]

	first, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	f.noDeletes.Store(true)
	f.dropDelete.Store(true) // the release's
	if err := first.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded with its reply lost")
	}
	second, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(ctx)
	if second.Token() == first.Token() {
		t.Errorf("the second hold reused the name of the first, whose delete is pending")
	}
	f.noDeletes.Store(false)
	dlocktest.Eventually(t, 20*time.Second, "the pending delete landed", func() bool { return f.deleted.Load() > 0 })
	resp, err := admin.Get(ctx, l.RangeOf(key), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || second.Err() != nil {
		t.Errorf("the second hold after the first's late delete: %d keys, Err %v; want its key, held", len(resp.Kvs), second.Err())
	}
}
