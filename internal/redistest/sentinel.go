package redistest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which a Sentinel group monitors its master.
const MasterName = "dlock"

// settleTimeout bounds how long a Sentinel group may take to start or to
// fail over: seconds on a quiet machine, but a Sentinel's hello comes every
// 2s and a machine whose cores the suite fills runs it late.
const settleTimeout = time.Minute

// SentinelGroup is a master, its replicas and the Sentinels that watch
// them, all on loopback. Sentinels judge a master down after 500ms without
// a reply, so a failover takes a second or two.
type SentinelGroup struct {
	data      []*Server // the master first, at the start; roles change
	sentinels []*Server
}

// StartSentinel starts a group of one master, replicas replicas and
// sentinels Sentinels (quorum: a majority), stopped when t ends.
func StartSentinel(t TB, replicas, sentinels int) *SentinelGroup {
	t.Helper()
	g, err := NewSentinel(t.TempDir(), replicas, sentinels)
	return started(t, g, err)
}

// NewSentinel is StartSentinel with the files under dir; the caller must
// call Close.
func NewSentinel(dir string, replicas, sentinels int) (_ *SentinelGroup, err error) {
	if replicas < 1 || sentinels < 1 {
		return nil, errors.New("redistest: a Sentinel group needs a replica and a Sentinel")
	}
	g := &SentinelGroup{}
	defer func() {
		if err != nil {
			g.Close() // what started, not the nil a failed return gives
		}
	}()
	for i := range 1 + replicas {
		d := filepath.Join(dir, "data"+strconv.Itoa(i))
		// A replica's first sync starts at once, not after the default 5s
		// wait for other replicas.
		cfg := Config{Extra: []string{"repl-diskless-sync-delay 0"}}
		if i > 0 {
			cfg.Extra = append(cfg.Extra, "replicaof 127.0.0.1 "+strconv.Itoa(g.data[0].port))
		}
		s, err := New(d, cfg)
		if err != nil {
			return nil, err
		}
		g.data = append(g.data, s)
	}
	monitor := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", MasterName, g.data[0].port, sentinels/2+1),
		"sentinel down-after-milliseconds " + MasterName + " 500",
		"sentinel failover-timeout " + MasterName + " 2000", // a second failover may start 2× this after the first
		"sentinel parallel-syncs " + MasterName + " 1",
		"sentinel announce-ip 127.0.0.1",
	}
	for i := range sentinels {
		s, err := New(filepath.Join(dir, "sentinel"+strconv.Itoa(i)), Config{Sentinel: true, Extra: monitor})
		if err != nil {
			return nil, err
		}
		g.sentinels = append(g.sentinels, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	// Until every Sentinel knows every replica and every other Sentinel.
	err = Poll(ctx, func() error {
		for _, s := range g.sentinels {
			m, err := sentinelClient(s).Master(ctx, MasterName).Result()
			if err != nil {
				return err
			}
			if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
				return fmt.Errorf("sentinel %s sees %s replicas and %s other sentinels", s.Addr(), m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return g.replicasLinked(ctx, g.data[0])
	})
	if err != nil {
		return nil, fmt.Errorf("the Sentinel group did not settle: %w", err)
	}
	return g, nil
}

// sentinelClient is a short-lived client of one Sentinel.
func sentinelClient(s *Server) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
}

// Poll calls check every 20ms until it returns nil or ctx ends, and
// returns its last error then, with ctx's: the last one that was not the
// end of ctx, which says why.
func Poll(ctx context.Context, check func() error) error {
	var last error
	for {
		err := check()
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", last, ctx.Err())
		case <-time.After(20 * time.Millisecond): // poll interval, bounded by ctx
		}
	}
}

// SentinelAddrs are the Sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	var a []string
	for _, s := range g.sentinels {
		a = append(a, s.Addr())
	}
	return a
}

// FailoverOptions returns options for a failover client of the group,
// with short timeouts that suit tests.
func (g *SentinelGroup) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName: MasterName, SentinelAddrs: g.SentinelAddrs(),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	}
}

// Client returns a failover client of the group, closed when t ends.
func (g *SentinelGroup) Client(t TB) *redis.Client {
	c := redis.NewFailoverClient(g.FailoverOptions())
	t.Cleanup(func() { c.Close() })
	return c
}

// Master returns the server that every Sentinel names as the master.
func (g *SentinelGroup) Master(ctx context.Context) (*Server, error) {
	var addr string
	for _, s := range g.sentinels {
		c := sentinelClient(s)
		a, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		c.Close()
		if err != nil {
			return nil, err
		}
		if got := strings.Join(a, ":"); addr == "" {
			addr = got
		} else if got != addr {
			return nil, fmt.Errorf("the Sentinels disagree: %s and %s", addr, got)
		}
	}
	for _, d := range g.data {
		if d.Addr() == addr {
			return d, nil
		}
	}
	return nil, fmt.Errorf("the Sentinels name %s, which is not in the group", addr)
}

// role is the server's ROLE: "master" or "slave".
func role(ctx context.Context, s *Server) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(r) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	name, _ := r[0].(string)
	return name, nil
}

// replicasLinked checks that every live server but master replicates from
// master with its link up.
func (g *SentinelGroup) replicasLinked(ctx context.Context, master *Server) error {
	for _, d := range g.data {
		if d == master || !d.running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: d.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_port:"+strconv.Itoa(master.port)+"\r") || !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s does not replicate from %s yet", d.Addr(), master.Addr())
		}
	}
	return nil
}

// settled waits until every Sentinel names one master other than old and
// that server says it is master.
func (g *SentinelGroup) settled(ctx context.Context, old *Server) (*Server, error) {
	var m *Server
	err := Poll(ctx, func() error {
		var err error
		if m, err = g.Master(ctx); err != nil {
			return err
		}
		if m == old {
			return errors.New("the Sentinels still name the old master")
		}
		if r, err := role(ctx, m); err != nil || r != "master" {
			return fmt.Errorf("the new master %s says role %q (%v)", m.Addr(), r, err)
		}
		return nil
	})
	return m, err
}

// Settle waits until every live server replicates from the master the
// Sentinels name. After a Failover, the old master goes on taking writes
// as a master until a Sentinel tells it otherwise, which can take 10s (a
// Sentinel reads each server's INFO every 10s): a real deployment has the
// same window.
func (g *SentinelGroup) Settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	return Poll(ctx, func() error {
		m, err := g.Master(ctx)
		if err != nil {
			return err
		}
		return g.replicasLinked(ctx, m)
	})
}

// Failover asks the Sentinels for a failover (SENTINEL FAILOVER) and
// returns the new master once every Sentinel names it and it says it is
// master. The old master is demoted later: see Settle.
func (g *SentinelGroup) Failover(ctx context.Context) (*Server, error) {
	old, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	c := sentinelClient(g.sentinels[0])
	defer c.Close()
	// A replica that rejoined lately is not a candidate until the
	// Sentinels have read its INFO (NOGOODSLAVE), nor is a failover while
	// another runs (INPROG).
	var refused error
	err = Poll(ctx, func() error {
		err := c.Failover(ctx, MasterName).Err()
		if err != nil && !redis.HasErrorPrefix(err, "NOGOODSLAVE") && !redis.HasErrorPrefix(err, "INPROG") {
			refused = err
			return nil
		}
		return err
	})
	if err = errors.Join(err, refused); err != nil {
		return nil, err
	}
	return g.settled(ctx, old)
}

// KillMaster kills the master with SIGKILL and returns the replica the
// Sentinels promote in its place. The old master stays down until Rejoin.
func (g *SentinelGroup) KillMaster(ctx context.Context) (killed, promoted *Server, err error) {
	old, err := g.Master(ctx)
	if err != nil {
		return nil, nil, err
	}
	old.Kill()
	m, err := g.Promoted(ctx, old)
	return old, m, err
}

// Promoted waits until the Sentinels name a master other than old, and it
// says it is master, and returns it.
func (g *SentinelGroup) Promoted(ctx context.Context, old *Server) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	return g.settled(ctx, old)
}

// Rejoin restarts a killed server, empty; the Sentinels make it a replica
// of the current master. It returns once it replicates.
func (g *SentinelGroup) Rejoin(ctx context.Context, s *Server) error {
	if err := s.Restart(); err != nil {
		return err
	}
	return g.Settle(ctx)
}

// Close stops every server of the group.
func (g *SentinelGroup) Close() {
	for _, s := range append(g.sentinels, g.data...) {
		s.Close()
	}
}
