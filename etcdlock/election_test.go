package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Package election keeps its rules over the etcd driver.
func TestElection(t *testing.T) {
	cli := client(t)
	dlocktest.RunElection(t, dlocktest.Harness{
		New: func(t *testing.T, opts ...dlock.Option) dlock.Locker {
			l, err := etcdlock.New(cli, opts...)
			if err != nil {
				t.Fatalf("etcdlock.New: %v", err)
			}
			return l
		},
		Lose: func(t *testing.T, key string) {
			l, err := etcdlock.New(cli)
			if err != nil {
				t.Fatalf("etcdlock.New: %v", err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := cli.Delete(ctx, l.RangeOf(key), clientv3.WithPrefix()); err != nil {
				t.Fatalf("delete %q: %v", l.RangeOf(key), err)
			}
		},
		MinTTL: time.Second,
		Caps:   dlocktest.All,
	})
}
