package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// minTTL is the shortest --ttl: the watchdog renews every ttl/3, and a
// process cannot be relied on to renew much faster.
const minTTL = 100 * time.Millisecond

// durationFlag is a duration flag that takes what every duration of dlock
// takes: a Go duration (1.5s, 2m, 500ms) or a number of seconds (5, 1.5).
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationFlag(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/1e9 {
			return 0, errors.New("want a duration (30s, 2m, 500ms) or a number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// waitFlag is --wait (and -w): a duration as durationFlag takes it, or
// "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" || s == "inf" {
		w.forever, w.d = true, 0
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf(`%v, or "forever"`, err)
	}
	w.forever, w.d = false, d
	return nil
}

// exitCodeFlag is an exit code in 0..255.
type exitCodeFlag int

func (c *exitCodeFlag) String() string { return strconv.Itoa(int(*c)) }
func (c *exitCodeFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return errors.New("want an exit code from 0 to 255")
	}
	*c = exitCodeFlag(n)
	return nil
}

type runConfig struct {
	backend      backendFlags
	ttl          time.Duration
	wait         waitFlag
	owner        string
	fair         bool
	killGrace    time.Duration
	conflictCode exitCodeFlag
	lostCode     exitCodeFlag
	holdAtLeast  time.Duration
	acquired     time.Time // when the lock was acquired, for --hold-at-least
	limit        int       // with limitSet: a permit of KEY's semaphore
	limitSet     bool
	shared       bool // KEY's read lock
	exclusive    bool // KEY's write lock
}

func (c *runConfig) register(fs *flag.FlagSet) {
	c.backend.register(fs)
	c.conflictCode, c.lostCode = exitBusy, exitLost
	c.ttl, c.killGrace = dlock.DefaultTTL, 10*time.Second
	fs.Var((*durationFlag)(&c.ttl), "ttl", "`duration` of the lease of the lock; renewed every ttl/3 while CMD runs (at least "+minTTL.String()+"; on etcd, whole seconds from 1s)")
	fs.Var(&c.wait, "wait", "how long to wait for a busy lock: a `duration`, or forever (default 0: fail at once)")
	fs.Var(&c.wait, "w", "short for --wait: the `duration` to wait, as in flock(1)")
	fs.BoolFunc("n", "fail at once when the lock is busy: --wait 0, as in flock(1)", func(string) error {
		c.wait = waitFlag{}
		return nil
	})
	fs.StringVar(&c.owner, "owner", "", "owner `id`: holders with the same id share the lock (reentrant, e.g. a deploy id)")
	fs.BoolVar(&c.fair, "fair", false, "serve waiters in arrival order, across processes (Redis only)")
	fs.Var((*durationFlag)(&c.killGrace), "kill-grace", "when the lock is lost, `duration` between SIGTERM and SIGKILL to CMD")
	fs.Var(&c.conflictCode, "conflict-exit-code", "exit `code` when the lock is busy or the wait runs out")
	fs.Var(&c.lostCode, "lost-exit-code", "exit `code` when the lock is lost while CMD runs")
	fs.Var((*durationFlag)(&c.holdAtLeast), "hold-at-least", "keep KEY taken at least this `duration` from the acquisition, even after CMD and dlock exit: a cron job that other hosts fire a little later runs once per tick")
	fs.Func("limit", "run as one of at most `N` holders of KEY: a permit of KEY's semaphore, as consul lock -n", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("want a whole number of holders")
		}
		c.limit, c.limitSet = n, true
		return nil
	})
	fs.BoolVar(&c.shared, "shared", false, "take KEY's read lock: any number of --shared holders at once, none while an --exclusive one holds or waits")
	fs.BoolVar(&c.exclusive, "exclusive", false, "take KEY's write lock, which excludes --shared and --exclusive holders")
}

// kind is what run takes of KEY: its lock, a permit or a read or write
// lock; it says which flag asked for it, for messages.
func (c *runConfig) kind() (dlock.Kind, string) {
	switch {
	case c.limitSet:
		return dlock.KindSemaphore, "--limit"
	case c.shared, c.exclusive:
		if c.shared {
			return dlock.KindRWLock, "--shared"
		}
		return dlock.KindRWLock, "--exclusive"
	}
	return dlock.KindLock, ""
}

// check returns what is wrong with the flags that choose the kind of lock.
func (c *runConfig) checkKind() error {
	n := 0
	for _, on := range []bool{c.limitSet, c.shared, c.exclusive} {
		if on {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("--limit, --shared and --exclusive choose what to take of KEY: give one")
	case c.limitSet:
		if err := driver.CheckLimit(c.limit); err != nil {
			return fmt.Errorf("--limit %d: %v", c.limit, trimDlock(err))
		}
	}
	return nil
}

// needs lists the features of the store that the flags ask for.
func (c *runConfig) needs() []need {
	var n []need
	switch {
	case c.limitSet:
		n = append(n, need{"--limit", driver.FeatureSemaphore})
	case c.shared:
		n = append(n, need{"--shared", driver.FeatureRWLock})
	case c.exclusive:
		n = append(n, need{"--exclusive", driver.FeatureRWLock})
	}
	if c.holdAtLeast > 0 {
		n = append(n, need{"--hold-at-least", driver.FeatureLapse})
	}
	return n
}

// acquirer returns the call that takes what the flags ask of be, or an
// error when be has no such kind of lock.
func (c *runConfig) acquirer(be backend) (func(context.Context, string, ...dlock.Option) (dlock.Lock, error), error) {
	kind, flag := c.kind()
	switch kind {
	case dlock.KindSemaphore:
		if s, ok := be.(dlock.Semaphore); ok {
			return dlock.Permits(s, c.limit).Lock, nil
		}
	case dlock.KindRWLock:
		if rw, ok := be.(dlock.RWLocker); ok {
			if c.shared {
				return rw.RLock, nil
			}
			return rw.WLock, nil
		}
	default:
		return be.Lock, nil
	}
	return nil, fmt.Errorf("%s: %s has no %v", flag, be.name(), kind)
}

// parseRunArgs reads "[flags] KEY [--] CMD [ARGS...]". Flags may come
// before and after KEY when CMD follows --; without --, everything after
// KEY is CMD.
func parseRunArgs(fs *flag.FlagSet, args []string) (key string, argv []string, err error) {
	before, after, dashdash := args, []string(nil), false
	for i, a := range args {
		if a == "--" {
			before, after, dashdash = args[:i], args[i+1:], true
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(before); err != nil {
			return "", nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 || !dashdash {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		before = rest[1:]
	}
	if len(pos) == 0 {
		return "", nil, errors.New("missing KEY")
	}
	key = pos[0]
	if dashdash {
		if len(pos) > 1 {
			return "", nil, fmt.Errorf("unexpected argument %q before --", pos[1])
		}
		argv = after
	} else {
		argv = pos[1:]
		if len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
			return "", nil, fmt.Errorf("flag %s after KEY: put flags before KEY, and -- before CMD", argv[0])
		}
	}
	if len(argv) == 0 {
		return "", nil, errors.New("missing CMD")
	}
	return key, argv, nil
}

func cmdRun(e *env, args []string) int {
	var c runConfig
	fs := flagSet(e, "run")
	c.register(fs)
	key, argv, err := parseRunArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(e.stdout, fs, "run")
		return exitOK
	}
	if err != nil {
		return usageError(e, "run", "%s", flagError(err))
	}
	store, err := c.backend.store(e)
	if err != nil {
		return usageError(e, "run", "%v", err)
	}
	if store == useEtcd {
		switch {
		case c.ttl < time.Second:
			return usageError(e, "run", "--ttl %v: etcd leases are whole seconds, so it must be at least 1s (a fractional one is rounded up)", c.ttl)
		case c.fair:
			return usageError(e, "run", "--fair: etcd has no fair mode (waiters are woken in no particular order)")
		}
	}
	if store == usePostgres && c.fair {
		return usageError(e, "run", "--fair: PostgreSQL has no fair mode (a release wakes the longest waiter, but a newcomer may take the lock first)")
	}
	switch {
	case c.ttl < minTTL:
		return usageError(e, "run", "--ttl %v: must be at least %v", c.ttl, minTTL)
	case c.killGrace < 0:
		return usageError(e, "run", "--kill-grace %v: must not be negative", c.killGrace)
	}
	if err := c.checkKind(); err != nil {
		return usageError(e, "run", "%v", err)
	}
	if err := driver.CheckKey(key); err != nil {
		return usageError(e, "run", "KEY: %v", trimDlock(err))
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return execError(e, argv[0], err)
	}

	be, code := c.backend.connect(e, "run", c.needs(), dlock.WithTTL(c.ttl))
	if be == nil {
		return code
	}
	defer be.close()
	acquire, err := c.acquirer(be)
	if err != nil {
		fmt.Fprintf(e.stderr, "dlock: %v\n", err)
		return exitUsage
	}

	opts := []dlock.Option{dlock.WithFair(c.fair), dlock.WithFencing(true)} // DLOCK_FENCE
	if c.owner != "" {
		opts = append(opts, dlock.WithOwner(c.owner))
	}
	if !c.wait.forever {
		opts = append(opts, dlock.WithWait(c.wait.d))
	}
	ctx, stopSignals := signalContext(e)
	start := time.Now()
	stopStatus := func() {}
	if (c.wait.forever || c.wait.d > 0) && isTerminal(e.stderr) {
		kind, _ := c.kind()
		stopStatus = showWaiting(ctx, e.stderr.(*os.File), be, kind, key, start)
	}
	lk, err := acquire(ctx, key, opts...)
	c.acquired = time.Now()
	stopStatus()
	stopSignals()
	var sig *signalError
	if err == nil && errors.As(context.Cause(ctx), &sig) {
		// The signal came as the lock was granted: give it back.
		release(e, lk)
		fmt.Fprintf(e.stderr, "dlock: %s while acquiring %q\n", sig, key)
		return sig.code()
	}
	if err != nil {
		var busy *dlock.NotAcquiredError
		switch {
		case errors.As(context.Cause(ctx), &sig):
			fmt.Fprintf(e.stderr, "dlock: %s while waiting for %q\n", sig, key)
			return sig.code()
		case errors.As(err, &busy):
			fmt.Fprintf(e.stderr, "dlock: %s\n", busyMessage(key, busy, time.Since(start), c.wait))
			return int(c.conflictCode)
		case errors.Is(err, dlock.ErrInvalidKey), errors.Is(err, dlock.ErrInvalidOption):
			return usageError(e, "run", "%v", trimDlock(err))
		}
		fmt.Fprintf(e.stderr, "dlock: %v\n", trimDlock(err))
		return exitUnavailable
	}
	return runHolding(e, &c, be.name(), lk, path, argv)
}

// busyMessage is the one line printed when the lock is busy.
func busyMessage(key string, err *dlock.NotAcquiredError, waited time.Duration, wait waitFlag) string {
	hint := "the holder's lease is unknown"
	if err.RetryAfter > 0 {
		hint = "retry after " + err.RetryAfter.Round(time.Millisecond).String()
	}
	if wait.d > 0 {
		return fmt.Sprintf("%q is still busy after waiting %v; %s", key, waited.Round(time.Millisecond), hint)
	}
	return fmt.Sprintf("%q is busy; %s", key, hint)
}

// execError reports a CMD that cannot be run, with the shell's codes.
func execError(e *env, name string, err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(e.stderr, "dlock: %s: command not found\n", name)
		return exitNotFound
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	fmt.Fprintf(e.stderr, "dlock: %s: cannot run: %v\n", name, err)
	return exitCannotExec
}

// runHolding runs CMD while lk is held, and releases lk after.
func runHolding(e *env, c *runConfig, store string, lk dlock.Lock, path string, argv []string) int {
	key := lk.Key()
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	if e.stdin != nil {
		cmd.Stdin = e.stdin
	}
	cmd.Env = append(os.Environ(),
		"DLOCK_KEY="+key,
		"DLOCK_TOKEN="+lk.Token(),
		"DLOCK_FENCE="+strconv.FormatUint(lk.Fence(), 10))
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		release(e, lk)
		return execError(e, argv[0], err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()

	var (
		lost  error
		done  = lk.Done()
		grace <-chan time.Time
	)
wait:
	for {
		select {
		case <-exited:
			break wait
		case s := <-e.signals:
			cmd.Process.Signal(s)
		case <-done:
			done = nil
			lost = lk.Err()
			fmt.Fprintf(e.stderr, "dlock: lost the lock on %q (%s); stopping %s: SIGTERM, then SIGKILL after %v\n",
				key, lostReason(store, lost), argv[0], c.killGrace)
			cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(c.killGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			grace = nil
			fmt.Fprintf(e.stderr, "dlock: %s still running %v after SIGTERM; sending SIGKILL\n", argv[0], c.killGrace)
			cmd.Process.Kill()
		}
	}
	if lost != nil {
		return int(c.lostCode)
	}
	if err := releaseAfter(e, lk, c.acquired.Add(c.holdAtLeast)); errors.Is(err, dlock.ErrLockLost) {
		fmt.Fprintf(e.stderr, "dlock: the lock on %q was lost before %s finished (%s)\n", key, argv[0], lostReason(store, err))
		return int(c.lostCode)
	}
	return childCode(cmd.ProcessState)
}

// release gives lk back, warning when it cannot; the lease then ends by
// itself. It returns the release error.
func release(e *env, lk dlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), driver.ReleaseTimeout)
	defer cancel()
	err := lk.Unlock(ctx)
	if err != nil && !errors.Is(err, dlock.ErrLockLost) {
		fmt.Fprintf(e.stderr, "dlock: could not release %q (%v); it frees when its lease runs out\n", lk.Key(), trimDlock(err))
	}
	return err
}

// lostReason says in a few words why a lock of store was lost.
func lostReason(store string, err error) string {
	switch {
	case errors.Is(err, dlock.ErrLeaseExpired):
		return store + " could not be reached to renew it before its lease ended"
	case errors.Is(err, dlock.ErrOwnershipLost):
		return "its lease ran out or someone deleted it"
	}
	return trimDlock(err)
}

// childCode is the exit code of a finished CMD: its own, or 128+N when a
// signal N ended it.
func childCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ps.ExitCode()
}
