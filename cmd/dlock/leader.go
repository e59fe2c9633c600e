package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/election"
)

// leaderJSON is a leader in the --json output of leader: one object a line.
type leaderJSON struct {
	Key     string `json:"key"`
	Elected bool   `json:"elected"`
	Value   string `json:"value,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	Time    string `json:"time,omitempty"` // --watch: when the change was seen
}

func cmdLeader(e *env, args []string) int {
	var watch bool
	f, pos, code := inspectCommand(e, "leader", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&watch, "watch", false, "follow the leader: print it, then a line at each change, until interrupted")
	})
	if f == nil {
		return code
	}
	key, code := keyArg(e, "leader", pos)
	if code != 0 {
		return code
	}
	needs := []need{inspection("leader")}
	if watch {
		needs = append(needs, need{"--watch", driver.FeatureWatch})
	}
	be, code := f.backend.connect(e, "leader", needs)
	if be == nil {
		return code
	}
	defer be.close()
	ctx, stop := signalContext(e)
	defer stop()
	el, err := election.New(be, key)
	if err != nil {
		return usageError(e, "leader", "KEY: %v", trimDlock(err))
	}
	print := func(l election.Leader, at time.Time) {
		if f.json {
			j := leaderJSON{Key: key, Elected: l.Elected, Value: l.Value, Epoch: l.Epoch}
			if !at.IsZero() {
				j.Time = at.UTC().Format(time.RFC3339Nano)
			}
			b, _ := json.Marshal(j)
			fmt.Fprintf(e.stdout, "%s\n", b)
			return
		}
		line := "vacant"
		if l.Elected {
			line = fmt.Sprintf("%s\tepoch %d", l.Value, l.Epoch)
		}
		if !at.IsZero() {
			line = at.Format(time.RFC3339) + "\t" + line
		}
		fmt.Fprintln(e.stdout, line)
	}
	if !watch {
		l, err := el.Leader(ctx)
		if err != nil {
			return backendError(e, ctx, err)
		}
		print(l, time.Time{})
		return exitOK
	}
	changes, err := el.Observe(ctx)
	if err != nil {
		return backendError(e, ctx, err)
	}
	for l := range changes {
		print(l, time.Now())
	}
	var sig *signalError
	if errors.As(context.Cause(ctx), &sig) {
		return sig.code()
	}
	fmt.Fprintf(e.stderr, "dlock: stopped following %q: the connection to %s closed\n", key, be.name())
	return exitUnavailable
}
