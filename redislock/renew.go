package redislock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// maxPipeline bounds the renewals sent in one batch.
const maxPipeline = 1000

// The watchdog is package driver's (driver.Watchdog): one per Locker keeps
// every held lock's lease, renews it every ttl/3, retries a
// renewal that failed for want of the server every ttl/20 until the lease
// deadline, and declares the lock lost at that deadline, or at once when
// the server refuses a renewal. What is Redis's is here: the I/O of one
// batch of renewals, a token-checked PEXPIRE per lock, sent as
//
//   - one call of renew.lua on a single server (or Sentinel's master);
//   - one pipeline of refresh.lua calls for a Cluster, or a Ring;
//   - one pipeline per master of refresh.lua calls followed by WAIT for a
//     Cluster whose locks ask replicas to acknowledge (see WithReplicaAck),
//
// so the cost is a few round trips per period whatever the number of
// locks, and two goroutines in all.

// newWatchdog prepares l's watchdog.
func (l *Locker) newWatchdog() error {
	_, l.oneServer = l.client.(*redis.Client) // a single server, or Sentinel's master
	cfg := driver.WatchdogConfig[*hold]{
		Drift:    redisnode.Drift,
		Renew:    l.renew,
		Lost:     func(lk *hold, cause error) { lk.lose(cause) },
		Lapsed:   func(lk *hold) { lk.end(dlock.ErrNotHeld) }, // a release with unknown outcome: the lease lapsed
		MaxBatch: maxPipeline,
	}
	if l.tables.Locks.Observed() {
		cfg.Renewed = l.renewed // nobody else hears of renewals
	}
	return l.watchdog.Init(cfg)
}

// renewBuffers are what the watchdog's renewer reuses batch after batch,
// so that renewing a batch allocates nothing per lock: only that
// goroutine touches them, one batch at a time.
type renewBuffers struct {
	call []any   // the command of a batch of plain locks (see renewPlain)
	out  []error // renew's results, which the watchdog reads before the next batch
}

// renew is the watchdog's renewal of a batch (see driver.WatchdogConfig's
// Renew): one error per lock, nil when renewed, dlock.ErrOwnershipLost
// when the token is gone, and any other error when the renewal did not
// reach Redis, or reached a master whose replicas did not acknowledge it
// in time (ErrNotReplicated: the lease the holder counts on is the one
// the replicas have, so the renewal does not count, and the watchdog
// retries it until the deadline).
func (l *Locker) renew(ctx context.Context, batch []driver.Renewal[*hold]) []error {
	// The handles have been out of the processor's cache since their last
	// renewal, and reading them costs most of the renewal's time on the
	// client: the batch is read once before it is sent, the fewest lines
	// of each handle, and after only when a lock asks replicas.
	var ack replicaAck // the most that a lock of the batch asks
	plain := true      // every lock of the batch a plain lock, renewed for the same lease
	for _, r := range batch {
		ack.n, ack.timeout = max(ack.n, r.Lock.ack.n), max(ack.timeout, r.Lock.ack.timeout)
		plain = plain && r.Lock.plain() && r.TTL == batch[0].TTL
	}
	var args [][]any
	if !l.oneServer || !plain {
		args = make([][]any, len(batch))
		for i, r := range batch {
			args[i] = r.Lock.renewal(r.TTL)
		}
	}
	var (
		codes []byte      // per lock: '1' renewed, '0' not ours
		errs  []error     // per lock, when the batch was a pipeline
		acks  []ackResult // per lock, when the batch asked replicas
		err   error
	)
	switch {
	case l.oneServer && plain:
		codes, acks, err = l.renewPlain(ctx, batch, ack)
	case l.oneServer:
		codes, acks, err = l.renewScript(ctx, args, ack)
	case ack.n > 0:
		codes, errs, acks = l.renewNodes(ctx, args, ack)
	default:
		codes, errs, err = l.renewPipeline(ctx, args)
		if redisnode.IsNoScript(err) {
			// the lease still counts from before the first pipeline: a
			// little shorter than it is, never longer
			if err = refreshScript.Load(ctx, l.client); err == nil {
				codes, errs, err = l.renewPipeline(ctx, args)
			}
		}
	}
	if err != nil {
		l.log.Warn("renewal failed", "key", batch[0].Lock.Key(), "locks", len(batch), "error", err)
	}
	out := l.renewBufs.out[:0]
	if cap(out) < len(batch) {
		out = make([]error, len(batch))
	}
	out = out[:len(batch)]
	clear(out)
	l.renewBufs.out = out
	for i, r := range batch {
		cerr := err
		if cerr == nil && errs != nil {
			cerr = errs[i]
		}
		switch {
		case cerr != nil:
			out[i] = cerr
		case codes[i] != '1':
			out[i] = dlock.ErrOwnershipLost
		case ack.n > 0 && r.Lock.ack.n > 0:
			// renewed, but the lease the holder counts on is the one the
			// replicas have
			out[i] = acks[i].check(r.Lock.ack)
		}
	}
	return out
}

// renewScript renews a batch of locks of one server in one call of renew.lua:
// one command, whatever the number of locks; with WAIT after it in the
// same round trip when the batch asks replicas (ack).
func (l *Locker) renewScript(ctx context.Context, args [][]any, ack replicaAck) ([]byte, []ackResult, error) {
	keys := make([]any, 0, 2*len(args))
	argv := make([]any, 0, 3*len(args))
	for _, a := range args { // a is refresh.lua's command: evalsha, sha, 2, keys..., argv...
		keys = append(keys, a[3:5]...)
		argv = append(argv, a[5:8]...)
	}
	var p redisnode.Processor = l.client
	var a *acker
	if ack.n > 0 {
		a = &acker{client: l.client, ack: ack}
		p = a
	}
	res, err := renewScript.Run(ctx, p, keys, argv...).Text()
	res, err = redisnode.RenewCodes(res, err, len(args))
	var acks []ackResult
	if a != nil {
		acks = slices.Repeat([]ackResult{{a.replicas, a.err}}, len(args))
	}
	return []byte(res), acks, err
}

// renewPlain is renewScript for a batch of plain locks renewed for the
// same lease: one call of renew_plain.lua, which takes a key and a token
// per lock.
func (l *Locker) renewPlain(ctx context.Context, batch []driver.Renewal[*hold], ack replicaAck) ([]byte, []ackResult, error) {
	// The lock's key and token as pointers to the handle's own strings, as
	// in keyArgs and tokenArg, but taken without reading those: go-redis
	// then reads the lines of the handle that plain() read.
	call := renewPlain.AppendCall(l.renewBufs.call[:0], len(batch))
	for _, r := range batch {
		call = append(call, &r.Lock.keys.Lock)
	}
	call = append(call, batch[0].TTL.Milliseconds())
	for _, r := range batch {
		call = append(call, r.Lock.TokenRef())
	}
	defer func() { l.renewBufs.call = call[:0] }()
	defer clear(call) // holds no lock's strings alive
	var p redisnode.Processor = l.client
	var a *acker
	if ack.n > 0 {
		a = &acker{client: l.client, ack: ack}
		p = a
	}
	res, err := renewPlain.RunCall(ctx, p, call).Text()
	res, err = redisnode.RenewCodes(res, err, len(batch))
	var acks []ackResult
	if a != nil {
		acks = slices.Repeat([]ackResult{{a.replicas, a.err}}, len(batch))
	}
	return []byte(res), acks, err
}

// plain reports whether lk is a plain lock: no owner, not a hold of a
// semaphore or a read-write lock.
func (lk *hold) plain() bool { return lk.Owner() == "" && lk.Kind() == driver.HoldLock }

// renewNodes renews a batch of locks of a Cluster that asks replicas (ack):
// one pipeline per master of refresh.lua calls followed by WAIT, sent to
// the masters at once. A lock whose slot migrates or moved is renewed
// where its keys are, with WAIT there (see sendAcked).
func (l *Locker) renewNodes(ctx context.Context, args [][]any, ack replicaAck) ([]byte, []error, []ackResult) {
	codes := make([]byte, len(args))
	errs := make([]error, len(args))
	acks := make([]ackResult, len(args))
	cc := l.client.(*redis.ClusterClient)
	on := map[*redis.Client][]int{}
	for i, a := range args {
		node, err := cc.MasterForKey(ctx, firstKey(a))
		if err != nil {
			errs[i] = err
			continue
		}
		on[node] = append(on[node], i)
	}
	var wg sync.WaitGroup
	for node, batch := range on {
		wg.Go(func() {
			cmds := make([]redis.Cmder, len(batch))
			for j, i := range batch {
				cmds[j] = redis.NewCmd(ctx, args[i]...)
			}
			res := sendAcked(ctx, cc, node, cmds, ack, refreshScript)
			for j, i := range batch {
				n, err := cmds[j].(*redis.Cmd).Int64()
				reloadAfter(cc, err)
				codes[i], errs[i], acks[i] = '0'+byte(n), err, res[j]
			}
		})
	}
	wg.Wait()
	return codes, errs, acks
}

// renewPipeline renews a batch of locks one refresh.lua call each, in one
// pipeline: for a Cluster or a Ring, whose locks live on many servers.
func (l *Locker) renewPipeline(ctx context.Context, args [][]any) ([]byte, []error, error) {
	cmds, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range args {
			p.Do(ctx, a...)
		}
		return nil
	})
	if err != nil && !errors.As(err, new(redis.Error)) {
		reloadAfter(l.client, err)
		return nil, nil, err // the connection failed: no reply is usable
	}
	codes := make([]byte, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		n, err := c.(*redis.Cmd).Int64()
		if redisnode.IsNoScript(err) {
			return nil, nil, err
		}
		codes[i], errs[i] = '0'+byte(n), err
	}
	return codes, errs, nil
}

// renewal returns the command that renews lk for ttl, built once per
// lease length: a renewal allocates nothing of its own. Only the
// watchdog's renewer calls it, one batch at a time, so the command is not
// changed while it is on the wire.
func (lk *hold) renewal(ttl time.Duration) []any {
	if lk.renewArgs == nil || lk.renewTTL != ttl {
		lk.renewArgs = refreshScript.Args(lk.leaseKeys(), lk.tokenArg, lk.ownerArg, lk.leaseArg(ttl))
		lk.renewTTL = ttl
	}
	return lk.renewArgs
}
