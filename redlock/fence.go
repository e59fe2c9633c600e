package redlock

import (
	"context"
	"fmt"
	"time"
)

// fence sets lk.fence from the counters of the nodes that granted the
// acquisition (fences: node -> the value its script left in its counter)
// and makes sure that a majority of the nodes hold at least that value
// before it is handed out.
//
// # The argument
//
// Every node keeps a counter per key. The script that grants a node's
// part of an acquisition moves the node's counter up and returns it: one
// step, or to the acquiring client's clock in µs when that is higher (the
// client sends the same clock to every node; a grant made by a release
// carries the releasing client's). The acquisition's fence F is the
// largest value returned by the majority M that granted it. Let W be the
// nodes of M whose counter now holds F. When W is a majority already —
// the usual case, for the clock passes the counters between two
// acquisitions, so that the nodes of M all return that clock, even one
// that missed an acquisition before — the fence is handed out with no
// further message: the acquisition costs one round trip. Otherwise raise.lua writes F to the other nodes of M, where the
// hold is still ours, one more round trip in parallel, until W is a
// majority. Either way, when Fence returns F, a majority W of the nodes
// has counter >= F, and it got there by a script that ran while the hold
// was ours on that node.
//
// Claim: if acquisition B of a key begins after acquisition A's fence
// F_A was handed out, or if A and B hold the lock one after the other
// (A's hold ended before B's began), then F_B > F_A, provided that no
// node of W_A lost its counter in between (see restart.go for nodes that
// restart empty).
//
// Proof. B's majority M_B and A's majority W_A share a node j: two
// majorities of the same N nodes always intersect. On j, the script that
// left j's counter >= F_A ran before B's script did: in the first case
// because it ran before F_A was handed out, and B's requests were sent
// after that; in the second because B could take j only once A's hold on
// j was gone, and A's hold was in place on j when the script ran (by
// Redlock's validity rule, A's keys outlive A's hold, so B cannot have
// taken j before and A after). A counter never goes down, so B's script
// on j read at least F_A and returned at least F_A + 1, and F_B, the
// largest value of M_B, is at least that. ∎
//
// No fewer round trips can do: the fence depends on the replies of a
// majority, so it cannot be written in the request that reads it, and a
// value kept by a minority alone could be missed by the next majority.
// The in-place increment is what lets the write ride in the first request
// whenever the nodes agree.
func (l *Locker) fence(ctx context.Context, lk *hold, fences map[int]uint64) error {
	var f uint64
	for _, v := range fences {
		f = max(f, v)
	}
	lk.SetFence(f)
	var behind []*node
	at := 0
	for i, v := range fences {
		if v == f {
			at++
		} else {
			behind = append(behind, l.nodes[i])
		}
	}
	if at >= l.quorum {
		return nil
	}
	need := l.quorum - at
	send := func(ctx context.Context, nd *node) reply {
		v, err := lk.scripts.raise.Run(ctx, nd.send, lk.keyArgs, lk.Token(), lk.Owner(), fmt.Sprint(f)).Int64()
		return reply{n: v, err: err}
	}
	enough := func(got []reply) bool {
		ok := 0
		for _, r := range got {
			if r.err == nil && r.n == 1 {
				ok++
			}
		}
		return ok >= need
	}
	got, rd := l.fanout(ctx, behind, l.nodeTimeout(lk.ttl), send, enough, nil)
	rd.settle(false)
	var errs []error
	for _, r := range got {
		switch {
		case r.err == nil && r.n == 1:
			at++
		case r.err == nil:
			errs = append(errs, fmt.Errorf("%s: the hold was gone before its fence was written", l.nodes[r.node].addr))
		default:
			errs = append(errs, fmt.Errorf("%s: %w", l.nodes[r.node].addr, r.err))
		}
	}
	if at < l.quorum {
		return l.noQuorum("lock", lk.Key(), at, append(errs, fmt.Errorf("the fence %d reached %d nodes", f, at)))
	}
	if !time.Now().Before(lk.deadline) {
		return l.noQuorum("lock", lk.Key(), at, []error{fmt.Errorf("the lease's validity ran out while its fence was written")})
	}
	return nil
}
