package redislock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// maxRedirects bounds the redirections that one acknowledged write
// follows: an ASK to the master importing its slot, a MOVED once the slot
// is there, and one more for a migration that began in between.
const maxRedirects = 3

// sendAcked sends cmds to node (the master of their keys) in one pipeline
// with WAIT after them, and returns WAIT's answer for each command. A
// write with WAIT goes to a master's own connection, not through the
// Cluster client, which would send the keyless WAIT to any node; so the
// redirections of a slot that migrates are followed here, each a round
// trip of its own, at most maxRedirects for a command:
//
//   - ASK (the command's keys are on the master importing the slot): the
//     command goes again to the master named, after ASKING, in one
//     pipeline with WAIT after it;
//   - MOVED (the slot moved): it goes again to the master named, and the
//     client reloads its topology.
//
// The acknowledgement of a command is the WAIT of the master that ran it.
// A command that a master answers NOSCRIPT is sent again once, after
// SCRIPT LOAD of script on that master, when script is not nil.
func sendAcked(ctx context.Context, client redis.UniversalClient, node *redis.Client, cmds []redis.Cmder, ack replicaAck, script *redisnode.Script) []ackResult {
	acks := make([]ackResult, len(cmds))
	cc, _ := client.(*redis.ClusterClient)
	type job struct {
		node   *redis.Client
		asking bool
		cmds   []int // indexes into cmds
		hops   int
	}
	all := make([]int, len(cmds))
	for i := range all {
		all[i] = i
	}
	jobs := []job{{node: node, cmds: all}}
	loaded := map[*redis.Client]bool{}
	for len(jobs) > 0 {
		j := jobs[0]
		jobs = jobs[1:]
		pipe := j.node.Pipeline()
		for _, i := range j.cmds {
			if j.asking {
				_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking")) // the command's reply tells
			}
			_ = pipe.Process(ctx, cmds[i])
		}
		wait := ack.wait(ctx)
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // every command has its own error
		replicas, werr := wait.Result()
		var again map[string]*job // by where, and how, the commands go next
		for _, i := range j.cmds {
			acks[i] = ackResult{replicas, werr}
			err := cmds[i].Err()
			next := job{node: j.node, asking: j.asking, hops: j.hops + 1}
			switch addr, ask := redirectOf(err); {
			case j.hops >= maxRedirects:
				continue
			case addr != "" && cc != nil:
				if !ask {
					cc.ReloadState(ctx)
				}
				n := nodeAt(ctx, cc, addr)
				if n == nil {
					continue // not a master the client knows: the error stands
				}
				next.node, next.asking = n, ask
			case script != nil && redisnode.IsNoScript(err) && !loaded[j.node]:
				loaded[j.node] = true
				if script.Load(ctx, j.node) != nil {
					continue
				}
			default:
				continue
			}
			if again == nil {
				again = map[string]*job{}
			}
			where := next.node.Options().Addr
			if next.asking {
				where += " asking"
			}
			if p := again[where]; p != nil {
				p.cmds = append(p.cmds, i)
				continue
			}
			next.cmds = []int{i}
			again[where] = &next
		}
		for _, p := range again {
			jobs = append(jobs, *p)
		}
	}
	return acks
}

// redirectOf returns the address that a Cluster redirection err names,
// and whether it is an ASK (else a MOVED); "" when err is no redirection.
func redirectOf(err error) (addr string, ask bool) {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return "", false
	}
	f := strings.Fields(re.Error())
	if len(f) != 3 || f[0] != "ASK" && f[0] != "MOVED" {
		return "", false
	}
	return f[2], f[0] == "ASK"
}

// nodeAt returns the Cluster client's node client of the master at addr,
// or nil when the client knows no master there.
func nodeAt(ctx context.Context, cc *redis.ClusterClient, addr string) *redis.Client {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	_ = cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		if n.Options().Addr == addr {
			mu.Lock()
			found = n
			mu.Unlock()
		}
		return nil
	})
	return found
}
