package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// runSchedule throws faults drawn from cfg.Seed until until: one every
// one to three TTLs, each undone before the next. The first round throws
// each kind of cfg.Faults once, in an order drawn from the seed, and goes
// on past until if it must (a loaded machine can make faults slow): a run
// meets every fault it names, within cfg.cover() on a machine that keeps
// up.
func runSchedule(ctx context.Context, cfg Config, env *servers, ws *workers, st *store, until int64) []fault {
	var sched []fault
	if len(cfg.Faults) == 0 {
		sleep(ctx, time.Duration(until-now()))
		return nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	first := rng.Perm(len(cfg.Faults))
	for n := 0; ctx.Err() == nil; n++ {
		gap := cfg.TTL + time.Duration(rng.Int64N(int64(2*cfg.TTL)))
		kind := cfg.Faults[rng.IntN(len(cfg.Faults))]
		if n < len(first) {
			kind = cfg.Faults[first[n]]
		}
		if now()+int64(gap+3*cfg.TTL) > until && n >= len(first) {
			sleep(ctx, time.Duration(max(until-now(), 0)))
			return sched
		}
		sleep(ctx, gap) // the quiet time between two faults
		f := fault{Kind: kind, At: now()}
		switch kind {
		case PauseHolder, KillHolder, CutHolder, CutMajority, SlowHolder:
			w := st.holder()
			if w < 0 {
				w = rng.IntN(cfg.Workers)
			}
			f.Target = fmt.Sprintf("worker %d", w)
			switch kind {
			case PauseHolder:
				f.At, f.End = ws.pause(ctx, w, 2*cfg.TTL)
			case KillHolder:
				st.forget(w)
				st.killed(ws.kill(w))
			case CutHolder:
				ws.network(ctx, w, true, 0, 2*cfg.TTL)
			case CutMajority:
				cut := rng.Perm(len(env.nodes))[:len(env.nodes)/2+1]
				slices.Sort(cut)
				f.Target += fmt.Sprintf(" from masters %v", cut)
				ws.network(ctx, w, true, 0, 2*cfg.TTL, cut...)
			case SlowHolder:
				ws.network(ctx, w, false, cfg.TTL/2, 2*cfg.TTL)
			}
			f.End = now()
		case LoseReply, RepeatCommand:
			w := st.holder()
			if w < 0 || rng.IntN(2) == 0 { // a worker that waits, or the holder
				w = rng.IntN(cfg.Workers)
			}
			rf := loseReplies
			if kind == RepeatCommand {
				rf = repeatCommands
			}
			hits := ws.replies(ctx, w, rf, 2*cfg.TTL)
			f.Target, f.End = fmt.Sprintf("worker %d (%d commands)", w, hits), now()
		case PauseServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Pause()
			sleep(ctx, cfg.TTL*3/2) // the fault: the server stays stopped
			env.nodes[i].Resume()
			f.End = now()
		case KillServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Kill()
			sleep(ctx, cfg.restartDelay()) // the fault: the server stays down
			if err := env.nodes[i].Restart(); err != nil {
				f.Target += fmt.Sprintf(" (not restarted: %v)", err)
			}
			f.End = now()
		case RestartServer:
			i := rng.IntN(len(env.nodes))
			f.Target = env.nodeName(i)
			env.nodes[i].Restart()
			f.End = now()
		case Failover:
			f.Target = "the Sentinels"
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			if m, err := env.sentinel.Failover(fctx); err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			} else if err := env.sentinel.Settle(fctx); err != nil {
				f.Target += fmt.Sprintf(" (to %s, not settled: %v)", m.Addr(), err)
			} else {
				f.Target += " (to " + m.Addr() + ")"
			}
			cancel()
			f.End = now()
		case IsolateLeader, PartitionMembers:
			l, err := env.etcd.Leader()
			if err != nil {
				l = rng.IntN(env.etcd.Size())
			}
			others := []int{}
			for i := range env.etcd.Size() {
				if i != l {
					others = append(others, i)
				}
			}
			rng.Shuffle(len(others), func(a, b int) { others[a], others[b] = others[b], others[a] })
			switch {
			case kind == IsolateLeader:
				f.Target = fmt.Sprintf("etcd member %d (the leader)", l)
				err = env.etcd.Isolate(l)
			case n%2 == 0 || len(others) < 2:
				f.Target = fmt.Sprintf("etcd members %d (the leader) and %d", l, others[0])
				err = env.etcd.Partition(l, others[0])
			default:
				f.Target = fmt.Sprintf("etcd members %d and %d", others[0], others[1])
				err = env.etcd.Partition(others[0], others[1])
			}
			if err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			}
			sleep(ctx, 2*cfg.TTL) // the fault: the members stay apart
			env.etcd.Heal()
			f.End = now()
		case ClusterFailover, MigrateSlot:
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			var err error
			if kind == ClusterFailover {
				f.Target, err = env.cluster.failover(fctx)
			} else {
				to := (env.cluster.owner + 1 + rng.IntN(len(env.cluster.c.Masters)-1)) % len(env.cluster.c.Masters)
				f.Target, err = env.cluster.migrate(fctx, to)
			}
			cancel()
			if err != nil {
				f.Target += fmt.Sprintf(" (%v)", err)
			}
			f.End = now()
		case KillMaster:
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			killed, promoted, err := env.sentinel.KillMaster(fctx)
			switch {
			case err != nil:
				f.Target = fmt.Sprintf("the master (%v)", err)
			default:
				f.Target = fmt.Sprintf("the master %s (%s promoted)", killed.Addr(), promoted.Addr())
			}
			if killed != nil {
				if err := env.sentinel.Rejoin(fctx, killed); err != nil {
					f.Target += fmt.Sprintf(" (not rejoined: %v)", err)
				}
			}
			cancel()
			f.End = now()
		case StopMember:
			i := rng.IntN(env.etcd.Size())
			if n%2 == 0 {
				if l, err := env.etcd.Leader(); err == nil {
					i = l
				}
			}
			f.Target = fmt.Sprintf("etcd member %d", i)
			env.etcd.Stop(i)
			sleep(ctx, 2*cfg.TTL) // the fault: the member stays down
			env.etcd.Restart(i)
			f.End = now()
		}
		sched = append(sched, f)
	}
	return sched
}

// signalGroup sends sig to the process group that cmd leads.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
