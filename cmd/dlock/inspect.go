package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// inspectKind reads key's lock of kind k from be.
func inspectKind(ctx context.Context, be backend, k dlock.Kind, key string) (dlock.Info, error) {
	if k == dlock.KindLock {
		return be.Inspect(ctx, key)
	}
	ki, ok := be.(driver.KindInspector)
	if !ok {
		return dlock.Info{}, fmt.Errorf("%s has no %v", be.name(), k)
	}
	return ki.InspectKind(ctx, k, key)
}

// holdsString says who holds a semaphore or read-write lock: "2 of 3
// permits", "3 readers", "a writer".
func holdsString(i dlock.Info) string {
	switch {
	case i.Kind == dlock.KindSemaphore:
		return fmt.Sprintf("%d of %d permits", i.Holds, i.Limit)
	case i.Holds == 0:
		return "free"
	case i.Readers == 0:
		return "a writer"
	case i.Readers == 1 && i.Holds == 1:
		return "1 reader"
	case i.Readers == i.Holds:
		return fmt.Sprintf("%d readers", i.Readers)
	}
	return fmt.Sprintf("a writer and %d readers of its owner", i.Readers)
}

// jsonErrors keeps a command's output JSON when it fails under --json:
// the error it prints goes to stdout too, as {"error": ..., "exit_code": N}.
func jsonErrors(run func(*env, []string) int) func(*env, []string) int {
	return func(e *env, args []string) int {
		before, _, _ := strings.Cut(strings.Join(args, "\x00"), "\x00--\x00")
		if !slices.ContainsFunc(strings.Split(before, "\x00"), func(a string) bool {
			return a == "--json" || a == "-json" || a == "--json=true" || a == "-json=true"
		}) {
			return run(e, args)
		}
		var msg bytes.Buffer
		je := *e
		je.stderr = io.MultiWriter(e.stderr, &msg)
		code := run(&je, args)
		if code != exitOK {
			line, _, _ := strings.Cut(msg.String(), "\n")
			writeJSON(e.stdout, struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}{strings.TrimPrefix(line, "dlock: "), code})
		}
		return code
	}
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func ttlString(d time.Duration) string {
	if d < 0 {
		return "no expiry"
	}
	return d.Round(time.Millisecond).String()
}

// inspectFlags are the flags of status, ls and unlock.
type inspectFlags struct {
	backend backendFlags
	json    bool
}

// inspectCommand parses the flags of status, ls or unlock; extra adds
// flags of its own. A nil f means stop with code.
func inspectCommand(e *env, name string, args []string, extra func(*flag.FlagSet)) (f *inspectFlags, pos []string, code int) {
	f = &inspectFlags{}
	fs := flagSet(e, name)
	f.backend.register(fs)
	fs.BoolVar(&f.json, "json", false, "print JSON")
	if extra != nil {
		extra(fs)
	}
	pos, stop, code := parseFlags(e, fs, name, args)
	if stop {
		return nil, nil, code
	}
	return f, pos, 0
}

// keyArg returns the one KEY argument of command name, or a usage error's
// exit code when pos is not exactly one valid key.
func keyArg(e *env, name string, pos []string) (string, int) {
	switch {
	case len(pos) == 0:
		return "", usageError(e, name, "missing KEY")
	case len(pos) > 1:
		return "", usageError(e, name, "unexpected argument %q after KEY", pos[1])
	}
	if err := driver.CheckKey(pos[0]); err != nil {
		return "", usageError(e, name, "KEY: %v", trimDlock(err))
	}
	return pos[0], 0
}

func cmdStatus(e *env, args []string) int {
	f, pos, code := inspectCommand(e, "status", args, nil)
	if f == nil {
		return code
	}
	key, code := keyArg(e, "status", pos)
	if code != 0 {
		return code
	}
	be, code := f.backend.connect(e, "status", []need{inspection("status")})
	if be == nil {
		return code
	}
	defer be.close()
	ctx, stop := signalContext(e)
	defer stop()
	rows, err := keyRows(ctx, be, key)
	if err != nil {
		return backendError(e, ctx, err)
	}
	if f.json {
		out := make([]lockJSON, 0, len(rows))
		for _, i := range rows {
			out = append(out, toJSON(i))
		}
		writeJSON(e.stdout, out)
		return exitOK
	}
	printTable(e.stdout, rows)
	return exitOK
}

// patternArg is the PATTERN argument of command name, "*" when pos has
// none. It checks the pattern before the command connects: it is the same
// error on every store.
func patternArg(e *env, name string, pos []string) (pattern string, stop bool, code int) {
	if len(pos) > 1 {
		return "", true, usageError(e, name, "unexpected argument %q after PATTERN", pos[1])
	}
	pattern = "*"
	if len(pos) == 1 {
		pattern = pos[0]
	}
	if _, err := driver.ParsePattern(pattern); err != nil {
		return "", true, usageError(e, name, "PATTERN: %v", trimDlock(err))
	}
	return pattern, false, 0
}

func cmdList(e *env, args []string) int {
	f, pos, code := inspectCommand(e, "ls", args, nil)
	if f == nil {
		return code
	}
	pattern, quit, code := patternArg(e, "ls", pos)
	if quit {
		return code
	}
	be, code := f.backend.connect(e, "ls", []need{inspection("ls")})
	if be == nil {
		return code
	}
	defer be.close()
	ctx, stop := signalContext(e)
	defer stop()
	infos, err := listAll(ctx, be, pattern)
	if errors.Is(err, path.ErrBadPattern) {
		return usageError(e, "ls", "PATTERN: %v", trimDlock(err))
	}
	if err != nil {
		return backendError(e, ctx, err)
	}
	if f.json {
		out := make([]lockJSON, 0, len(infos))
		for _, i := range infos {
			out = append(out, toJSON(i))
		}
		writeJSON(e.stdout, out)
		return exitOK
	}
	if len(infos) == 0 {
		fmt.Fprintf(e.stderr, "dlock: no held locks match %q under prefix %q\n", pattern, f.backend.prefix)
		return exitOK
	}
	printTable(e.stdout, infos)
	return exitOK
}

func cmdUnlock(e *env, args []string) int {
	var force bool
	f, pos, code := inspectCommand(e, "unlock", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&force, "force", false, "really delete the lock, whoever holds it")
	})
	if f == nil {
		return code
	}
	key, code := keyArg(e, "unlock", pos)
	if code != 0 {
		return code
	}
	if !force {
		return usageError(e, "unlock", "refusing to delete the lock %q without --force: its holder may still be working (see `dlock status %s`)", key, key)
	}
	be, code := f.backend.connect(e, "unlock", []need{inspection("unlock")})
	if be == nil {
		return code
	}
	defer be.close()
	ctx, stop := signalContext(e)
	defer stop()
	info, err := be.ForceUnlock(ctx, key)
	if errors.Is(err, dlock.ErrNotHeld) {
		fmt.Fprintf(e.stderr, "dlock: %q is not held; nothing deleted\n", key)
		return exitFailure
	}
	if err != nil {
		return backendError(e, ctx, err)
	}
	if f.json {
		writeJSON(e.stdout, toJSON(info))
		return exitOK
	}
	holder := "a plain lock"
	if info.Owner != "" {
		holder = fmt.Sprintf("owner %q (%d holds)", info.Owner, info.Holds)
	}
	fmt.Fprintf(e.stdout, "deleted %q: %s, fence %d, %s of lease left\n", key, holder, info.Fence, ttlString(info.TTL))
	return exitOK
}

// backendError reports an error of the lock store during status, ls or unlock.
func backendError(e *env, ctx context.Context, err error) int {
	var sig *signalError
	if errors.As(context.Cause(ctx), &sig) {
		fmt.Fprintf(e.stderr, "dlock: %s\n", sig)
		return sig.code()
	}
	fmt.Fprintf(e.stderr, "dlock: %v\n", trimDlock(err))
	return exitFailure
}
