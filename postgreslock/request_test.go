package postgreslock

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

type valueKey struct{}

// The requests that begin within one step share a bound, which ends
// RequestTimeout after the first of them began (a cut: a timeout error)
// or when its parent ends (no timeout); a request carries its caller's
// values, and what waits for its end (a statement's watch) is run then.
func TestBoundsShareAStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		bs := &bounds{parent: parent}
		ctx := context.WithValue(context.Background(), valueKey{}, "v")
		start := time.Now()
		a := bs.request(ctx)
		time.Sleep(boundStep - time.Millisecond)
		b := bs.request(ctx)
		if a.b != b.b {
			t.Fatal("two requests within one step have bounds of their own")
		}
		time.Sleep(time.Millisecond)
		c := bs.request(ctx)
		if c.b == a.b {
			t.Fatal("a request a step after the first shares its bound")
		}
		if d, ok := b.Deadline(); !ok || !d.Equal(start.Add(RequestTimeout)) {
			t.Fatalf("deadline %v, %v; want %v", d, ok, start.Add(RequestTimeout))
		}
		if v := b.Value(valueKey{}); v != "v" {
			t.Fatalf("a request's value %v; want the caller's", v)
		}
		fired := make(chan struct{})
		context.AfterFunc(b, func() { close(fired) })
		time.Sleep(RequestTimeout - boundStep - time.Nanosecond)
		synctest.Wait()
		if a.Err() != nil {
			t.Fatalf("the bound ended before RequestTimeout: %v", a.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case <-fired:
		default:
			t.Fatal("what waited for the request's end did not run when its bound ended")
		}
		var ne net.Error
		if err := a.cut(errors.New("read: i/o timeout")); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("a cut statement's error %v; want a timeout", err)
		}
		if c.Err() != nil {
			t.Fatal("the next step's bound ended with the first")
		}
		cancel()
		synctest.Wait()
		if c.Err() == nil {
			t.Fatal("a bound outlived its parent")
		}
		if err := c.cut(errors.New("x")); errors.As(err, &ne) {
			t.Fatalf("a statement its parent's end cut has a timeout error: %v", err)
		}
	})
}
