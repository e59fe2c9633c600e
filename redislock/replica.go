package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated reports that fewer replicas than WithReplicaAck asked
// for acknowledged a write in time. An acquisition that falls short is
// given back and returns it (a waiting Lock tries again until its wait
// ends); a renewal or a Refresh that falls short does not lengthen the
// lease the holder counts on.
var ErrNotReplicated = errors.New("redislock: not acknowledged by enough replicas")

// WithReplicaAck makes a Locker (or one call) count a write only once n
// replicas of the master that took it acknowledged it, waiting at most
// timeout: an acquisition, a renewal, a Refresh, and a grant to a waiter.
// Each write is followed by WAIT n timeout in the same round trip.
//
// Redis replicates asynchronously: a master that fails before its replica
// has a lock lets the promoted replica grant the lock again, and a master
// that Sentinel demoted may keep taking a holder's renewals for seconds.
// With WithReplicaAck(1, ...) on a master with one replica, a holder
// counts only on what the replica has, so a failover to that replica hands
// the lock to nobody else before the holder's Done closes. It costs the
// replication delay on every acquisition and renewal, and a master whose
// replicas are out of reach grants no lock at all. It is not consensus: a
// failover to a replica that did not acknowledge, or a replica that loses
// its data, can still grant a lock twice.
//
// n must be at least 1, and timeout positive and below the client's
// ReadTimeout (WAIT's reply comes in the same read); otherwise the call
// returns an error matching dlock.ErrInvalidOption. Keep timeout well
// below a third of the TTL, so that a renewal is acknowledged or refused
// before the next is due: a lock whose renewals keep falling short is lost
// at its lease deadline. Redis ends a WAIT at its timer's resolution, up
// to 100ms late at the default hz of 10. It needs a
// *redis.Client (Sentinel's failover client is one) or a
// *redis.ClusterClient. The other drivers refuse it: etcd commits every
// write on a majority anyway.
func WithReplicaAck(n int, timeout time.Duration) dlock.Option {
	return func(o *dlock.Options) {
		if n < 1 || timeout <= 0 {
			o.Reject(fmt.Errorf("%w: WithReplicaAck(%d, %v) needs n >= 1 and a positive timeout", dlock.ErrInvalidOption, n, timeout))
			return
		}
		driver.SetOwn(o, func(a *replicaAck) { *a = replicaAck{n, timeout} })
	}
}

// replicaAck is what an acquisition asks of the replicas: n
// acknowledgements within timeout; n is 0 when it asks nothing.
type replicaAck struct {
	n       int
	timeout time.Duration
}

// String names the option that asked for a: WithReplicaAck(n, timeout).
func (a replicaAck) String() string {
	return fmt.Sprintf("redislock.WithReplicaAck(%d, %v)", a.n, a.timeout)
}

// ackOf is what an acquisition made with o asks of the replicas.
func ackOf(o dlock.Options) replicaAck {
	a, _ := o.Driver.(replicaAck)
	return a
}

// checkAck refuses an acknowledgement that client cannot carry.
func checkAck(client redis.UniversalClient, o dlock.Options) error {
	a, err := driver.Own[replicaAck](o)
	if err != nil || a.n == 0 {
		return err
	}
	var read time.Duration
	switch c := client.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return fmt.Errorf("%w: WithReplicaAck needs a *redis.Client or a *redis.ClusterClient, not a %T", dlock.ErrInvalidOption, client)
	}
	if read > 0 && a.timeout >= read {
		return fmt.Errorf("%w: WithReplicaAck's timeout %v is not below the client's ReadTimeout %v", dlock.ErrInvalidOption, a.timeout, read)
	}
	return nil
}

// short is the error of a write that got replicas acknowledgements, or
// none at all when err (WAIT's own error) is not nil.
func (a replicaAck) short(replicas int64, err error) error {
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, replicas, a.n, a.timeout)
}

// ackResult is WAIT's answer: the replicas that acknowledged, or its error.
type ackResult struct {
	replicas int64
	err      error
}

// check is nil when r answers what a asks, else why not.
func (r ackResult) check(a replicaAck) error {
	if r.err != nil || r.replicas < int64(a.n) {
		return a.short(r.replicas, r.err)
	}
	return nil
}

// wait is the WAIT command that follows a write.
func (a replicaAck) wait(ctx context.Context) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "wait", a.n, a.timeout.Milliseconds())
}

// acker sends each command with WAIT after it on the same connection, in
// one pipeline (one round trip), to the master of the command's first key,
// following the redirections of a slot that migrates (see sendAcked), and
// keeps WAIT's answer about the last one. It is a processor for one call:
// script.run falls back to EVAL through it with the same WAIT.
type acker struct {
	client redis.UniversalClient
	ack    replicaAck

	replicas int64 // the replicas that acknowledged the last command
	err      error // WAIT's error, when it failed
}

func (a *acker) Process(ctx context.Context, cmd redis.Cmder) error {
	node, err := masterFor(ctx, a.client, firstKey(cmd.Args()))
	if err != nil {
		cmd.SetErr(err)
		a.err = err
		return err
	}
	r := sendAcked(ctx, a.client, node, []redis.Cmder{cmd}, a.ack, nil)[0]
	reloadAfter(a.client, cmd.Err())
	a.replicas, a.err = r.replicas, r.err
	return cmd.Err()
}

// check is nil when the last command was acknowledged by enough replicas,
// else why not.
func (a *acker) check() error { return ackResult{a.replicas, a.err}.check(a.ack) }

// masterFor returns the client of the server that holds key: the client
// itself for one server, its master's on a Cluster (a Cluster pipeline
// would send a keyless WAIT to any node). checkAck made sure that client
// is one of the two.
func masterFor(ctx context.Context, client redis.UniversalClient, key string) (*redis.Client, error) {
	if cc, ok := client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return client.(*redis.Client), nil
}

// firstKey is the first key of one of the driver's commands: a script's
// (EVAL and EVALSHA name theirs after the script and the number of keys),
// or any other command's first argument; a string, or a pointer to one.
func firstKey(args []any) string {
	i := 1
	if name, _ := args[0].(string); name == "evalsha" || name == "eval" {
		i = 3
	}
	if i < len(args) {
		switch s := args[i].(type) {
		case string:
			return s
		case *string:
			return *s
		}
	}
	return ""
}
