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

// maxPipeline bounds the renewals of one script call, or of one pipeline
// of a script call per lock: Redis runs a script to its end before it
// serves anyone else.
const maxPipeline = 1000

// maxBatch bounds the renewals the watchdog hands over at once. The plain
// locks of one server, the common case, go in one pipeline of script calls
// of maxPipeline locks each: the renewals that fall due together cost one
// round trip, and the client wakes once for them, not once per call.
const maxBatch = 16 * maxPipeline

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
		MaxBatch: maxBatch,
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
	call  []any       // the commands of a batch of plain locks (see renewPlain)
	spans []plainSpan // where each of those commands is, in call and in the batch
	// loaded: the last pipeline of those commands found renew_plain.lua in
	// the server's cache (see renewPlains)
	loaded bool
	out    []error // renew's results, which the watchdog reads before the next batch
}

// plainSpan is one call of renew_plain.lua in a batch: the locks
// batch[lo:hi], renewed by the command call[start:end].
type plainSpan struct{ lo, hi, start, end int }

// renew is the watchdog's renewal of a batch (see driver.WatchdogConfig's
// Renew): one error per lock, nil when renewed, dlock.ErrOwnershipLost
// when the token is gone, and any other error when the renewal did not
// reach Redis, or reached a master whose replicas did not acknowledge it
// in time (ErrNotReplicated: the lease the holder counts on is the one
// the replicas have, so the renewal does not count, and the watchdog
// retries it until the deadline).
func (l *Locker) renew(ctx context.Context, batch []driver.Renewal[*hold]) []error {
	b := &l.renewBufs
	out := b.out[:0]
	if cap(out) < len(batch) {
		out = make([]error, len(batch))
	}
	out = out[:len(batch)]
	clear(out)
	b.out = out
	// The handles have been out of the processor's cache since their last
	// renewal, and reading them costs most of the renewal's time on the
	// client: each chunk of the batch is read once, the fewest lines of
	// each handle, and after the reply only when a lock asks replicas. A
	// chunk of plain locks of one server becomes a call of
	// renew_plain.lua, and those calls are sent together (see
	// renewPlains); any other chunk is sent on its own.
	call, spans := b.call[:0], b.spans[:0]
	for lo := 0; lo < len(batch); lo += maxPipeline {
		hi := min(lo+maxPipeline, len(batch))
		chunk := batch[lo:hi]
		if !l.oneServer || !plainChunk(chunk) {
			l.renewChunk(ctx, chunk, out[lo:hi])
			continue
		}
		start := len(call)
		call = appendRenewPlain(call, chunk)
		spans = append(spans, plainSpan{lo, hi, start, len(call)})
	}
	b.call, b.spans = call[:0], spans[:0]
	defer clear(call) // holds no lock's strings alive
	if len(spans) > 0 {
		l.renewPlains(ctx, batch, call, spans, out)
	}
	return out
}

// plainChunk reports whether every lock of chunk is a plain lock that
// asks no replicas, renewed for the same lease.
func plainChunk(chunk []driver.Renewal[*hold]) bool {
	for _, r := range chunk {
		if r.Lock.ack.n > 0 || !r.Lock.plain() || r.TTL != chunk[0].TTL {
			return false
		}
	}
	return true
}

// renewChunk renews a chunk of at most maxPipeline locks, and writes the
// outcome of each in out.
func (l *Locker) renewChunk(ctx context.Context, batch []driver.Renewal[*hold], out []error) {
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
	case l.oneServer && plain: // whose locks ask replicas
		codes, acks, err = l.renewPlain(ctx, appendRenewPlain(nil, batch), len(batch), ack)
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

// appendRenewPlain appends to dst the call of renew_plain.lua that renews
// batch, plain locks renewed for the same lease: a key and a token per
// lock. The key and token are pointers to the handle's own strings, as in
// keyArgs and tokenArg, but taken without reading those: go-redis then
// reads the lines of the handle that plain() read.
func appendRenewPlain(dst []any, batch []driver.Renewal[*hold]) []any {
	dst = renewPlain.AppendCall(dst, len(batch))
	for _, r := range batch {
		dst = append(dst, &r.Lock.keys.Lock)
	}
	dst = append(dst, batch[0].TTL.Milliseconds())
	for _, r := range batch {
		dst = append(dst, r.Lock.TokenRef())
	}
	return dst
}

// renewPlain is renewScript for a batch of n plain locks renewed for the
// same lease: call, from appendRenewPlain.
func (l *Locker) renewPlain(ctx context.Context, call []any, n int, ack replicaAck) ([]byte, []ackResult, error) {
	var p redisnode.Processor = l.client
	var a *acker
	if ack.n > 0 {
		a = &acker{client: l.client, ack: ack}
		p = a
	}
	res, err := renewPlain.RunCall(ctx, p, call).Text()
	res, err = redisnode.RenewCodes(res, err, n)
	var acks []ackResult
	if a != nil {
		acks = slices.Repeat([]ackResult{{a.replicas, a.err}}, n)
	}
	return []byte(res), acks, err
}

// renewPlains sends the calls of renew_plain.lua of a batch, call[s.start:
// s.end] for each span s, in one pipeline, and writes the outcome of each
// lock in out. Until a pipeline has found the script in the server's
// cache, the pipeline loads it first, so that the calls are not sent in
// vain. The calls that find the script gone (a restart, SCRIPT FLUSH) are
// sent again in a second pipeline that loads it, and as EVAL if they find
// it gone again: their leases still count from before the first, a little
// shorter than they are, never longer.
func (l *Locker) renewPlains(ctx context.Context, batch []driver.Renewal[*hold], call []any, spans []plainSpan, out []error) {
	if len(spans) == 1 { // one call: no pipeline to build
		sp := spans[0]
		res, err := renewPlain.RunCall(ctx, l.client, call[sp.start:sp.end]).Text()
		l.filePlain(batch, sp, res, err, out)
		return
	}
	b := &l.renewBufs
	for try := 0; try < 2 && len(spans) > 0; try++ {
		pipe := l.client.Pipeline()
		if !b.loaded {
			_ = renewPlain.Load(ctx, pipe) // queued: the calls after it find the script
		}
		cmds := make([]*redis.Cmd, len(spans))
		for j, sp := range spans {
			cmds[j] = redis.NewCmd(ctx, call[sp.start:sp.end]...)
			_ = pipe.Process(ctx, cmds[j]) // queued; the error is the command's
		}
		_, _ = pipe.Exec(ctx) // each command has its own error
		b.loaded = true
		var again []plainSpan
		for j, sp := range spans {
			res, err := cmds[j].Text()
			if redisnode.IsNoScript(err) {
				b.loaded = false
				if try == 0 {
					again = append(again, sp)
					continue
				}
				res, err = renewPlain.RunCall(ctx, l.client, call[sp.start:sp.end]).Text()
			}
			l.filePlain(batch, sp, res, err, out)
		}
		spans = again
	}
}

// filePlain writes in out the outcome of the locks of span sp, whose call
// of renew_plain.lua answered res or err.
func (l *Locker) filePlain(batch []driver.Renewal[*hold], sp plainSpan, res string, err error, out []error) {
	codes, err := redisnode.RenewCodes(res, err, sp.hi-sp.lo)
	if err != nil {
		l.log.Warn("renewal failed", "key", batch[sp.lo].Lock.Key(), "locks", sp.hi-sp.lo, "error", err)
	}
	for i := sp.lo; i < sp.hi; i++ {
		switch {
		case err != nil:
			out[i] = err
		case codes[i-sp.lo] != '1':
			out[i] = dlock.ErrOwnershipLost
		}
	}
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
