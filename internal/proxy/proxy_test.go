package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echo starts a server that writes back each line it reads, and returns
// its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); io.Copy(c, c) })
		}
	})
	return ln.Addr().String()
}

// roundTrip sends a line through a new connection to addr and reads it
// back.
func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo returned " + line)
	}
	return nil
}

// A cut proxy drops its open connections and lets nothing through until
// it is healed.
func TestCutHeal(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := io.WriteString(open, "x\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(open).ReadString('\n'); err != nil {
		t.Fatalf("open connection before the cut: %v", err)
	}
	p.Cut()
	open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a connection open at the cut = %v, want EOF", err)
	}
	if err := roundTrip(p.Addr()); err == nil {
		t.Fatal("a round trip through a cut proxy succeeded")
	}
	p.Heal()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("through the healed proxy: %v", err)
	}
}
