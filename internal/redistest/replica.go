package redistest

import (
	"context"
	"fmt"
	"strconv"
)

// StartReplica starts a replica of master, waits until its link to the
// master is up, and stops it when t ends.
func StartReplica(t TB, master *Server) *Server {
	t.Helper()
	cfg := master.cfg
	cfg.Extra = append(append([]string{}, cfg.Extra...),
		"replicaof 127.0.0.1 "+strconv.Itoa(master.Port()), "repl-diskless-sync-delay 0")
	if cfg.Password != "" {
		cfg.Extra = append(cfg.Extra, "masterauth "+cfg.Password)
	}
	r := StartConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := Poll(ctx, func() error { return linkUp(ctx, r) }); err != nil {
		t.Fatalf("redistest: replica of %s: %v", master.Addr(), fmt.Errorf("%w\n%s", err, r.logTail()))
	}
	return r
}
