package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// The exit codes of dlock. A command run by `dlock run` passes its own
// through, so the codes of dlock itself sit where commands rarely go:
// sysexits.h's EX_UNAVAILABLE and EX_TEMPFAIL, and the shell's 126/127.
const (
	exitOK          = 0
	exitFailure     = 1   // the command failed: unlock of a free key, an error reply of Redis or etcd
	exitUsage       = 2   // bad flags or arguments
	exitUnavailable = 69  // Redis or etcd could not be reached
	exitBusy        = 75  // the lock is busy, or the wait ran out (--conflict-exit-code)
	exitLost        = 76  // the lock was lost while CMD ran (--lost-exit-code)
	exitNoPerm      = 77  // Redis or etcd refused the login, or the TLS handshake failed
	exitConfig      = 78  // Redis or etcd refused the configuration: a database that does not exist, a master the sentinels do not know
	exitCannotExec  = 126 // CMD was found but could not be run
	exitNotFound    = 127 // CMD was not found
	exitSignal      = 128 // + N: CMD, or dlock while waiting, ended by signal N
)

// version is the release, set at link time with
// -ldflags "-X main.version=v1.2.3"; otherwise it comes from the module's
// build information.
var version = ""

// env is what a command sees of the world: the process's in main, a
// test's in the tests.
type env struct {
	stdin          *os.File
	stdout, stderr io.Writer
	getenv         func(string) string
	// signals delivers SIGINT, SIGTERM and SIGHUP sent to dlock.
	signals <-chan os.Signal
	// wrapBackend, when not nil, stands in for each backend dlock opens:
	// the tests' way to take features away from a store.
	wrapBackend func(backend) backend
}

func main() {
	redis.SetLogger(quietLogger{})
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, signals: sigs}
	code := dlockMain(e, os.Args[1:])
	signal.Stop(sigs)
	os.Exit(code)
}

func dlockMain(e *env, args []string) int {
	args = moveGlobalFlags(args)
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "dlock: unknown command %q; run 'dlock help'\n", name)
	return exitUsage
}

// flagSet returns the flag set of command name, which prints its usage to
// stderr (or stdout for -h).
func flagSet(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dlock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed by usageError, once
	fs.Usage = func() {}
	return fs
}

// commandUsage prints the usage line and flags of command name.
func commandUsage(w io.Writer, fs *flag.FlagSet, name string) {
	c := lookup(name)
	fmt.Fprintf(w, "usage: dlock %s %s\n\n%s.\n", c.name, c.args, upperFirst(c.short))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	if fs != nil {
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nFlags:\n")
			printFlags(w, fs)
		}
	}
}

// printFlags lists the flags of fs as the README writes them: --name
// for a long flag, -n for a one-letter one.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		arg, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if arg != "" {
			line += " " + arg
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, usage)
	})
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseFlags parses args into fs, with flags before, between and after
// the arguments (up to a --, after which all are arguments), and returns
// the arguments. stop says the command should stop with code: -h prints
// the help and exits 0, a bad flag is a usage error.
func parseFlags(e *env, fs *flag.FlagSet, name string, args []string) (pos []string, stop bool, code int) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(e.stdout, fs, name)
			return nil, true, exitOK
		}
		if err != nil {
			return nil, true, usageError(e, name, "%s", flagError(err))
		}
		rest := fs.Args()
		if n := len(args) - len(rest); len(rest) == 0 || n > 0 && args[n-1] == "--" {
			return append(pos, rest...), false, 0
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// parseNoArgs is parseFlags for a command that takes no arguments.
func parseNoArgs(e *env, fs *flag.FlagSet, name string, args []string) (stop bool, code int) {
	pos, stop, code := parseFlags(e, fs, name, args)
	if !stop && len(pos) > 0 {
		return true, usageError(e, name, "unexpected argument %q", pos[0])
	}
	return stop, code
}

// flagError rewrites the flag package's errors with flags written as the
// help writes them: "--ttl -1s: must not be negative".
func flagError(err error) string {
	msg := err.Error()
	dashes := func(name string) string {
		if len(name) == 1 {
			return "-" + name
		}
		return "--" + name
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return dashes(m[2]) + " " + m[1] + ": " + m[3]
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag " + dashes(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return dashes(name) + " needs a value"
	}
	return msg
}

var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for flag -(\S+): (.*)$`)

// globalFlags are the flags that may come before the command: where the
// locks are, and --json.
var globalFlags = map[string]bool{"redis": true, "etcd": true, "postgres": true, "prefix": true, "etcd-user": true,
	"etcd-cacert": true, "etcd-cert": true, "etcd-key": true, "json": false} // name -> takes a value

// moveGlobalFlags turns "dlock --redis URL status KEY" into "dlock status
// --redis URL KEY". It leaves args alone when they do not start with a
// flag it knows.
func moveGlobalFlags(args []string) []string {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		takes, ok := globalFlags[name]
		if !ok {
			break
		}
		i++
		if takes && !hasValue {
			i++
		}
	}
	if i == 0 || i >= len(args) {
		return args
	}
	return append(append([]string{args[i]}, args[:i]...), args[i+1:]...)
}

// usageError prints a usage error as one line and a hint, and returns
// exitUsage.
func usageError(e *env, name, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "dlock %s: %s\n", name, fmt.Sprintf(format, args...))
	c := lookup(name)
	fmt.Fprintf(e.stderr, "usage: dlock %s %s (see `dlock help %s`)\n", c.name, c.args, c.name)
	return exitUsage
}

// signalContext returns a context cancelled when dlock receives a signal,
// with a *signalError as its cause. stop releases its goroutine.
func signalContext(e *env) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case s := <-e.signals:
			cancel(&signalError{s})
		case <-done:
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// signalError is the cause of a context ended by a signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "interrupted by " + e.sig.String() }

// code is the exit code of a process ended by the signal: 128+N.
func (e *signalError) code() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return exitSignal + int(s)
	}
	return exitSignal + int(syscall.SIGINT)
}

func cmdVersion(e *env, args []string) int {
	fs := flagSet(e, "version")
	if stop, code := parseNoArgs(e, fs, "version", args); stop {
		return code
	}
	fmt.Fprintln(e.stdout, versionString())
	return exitOK
}

func versionString() string {
	v, rev := version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	return fmt.Sprintf("dlock %s%s %s %s/%s", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func cmdHelp(e *env, args []string) int {
	switch len(args) {
	case 0:
		usage(e.stdout)
		return exitOK
	case 1:
		if c := lookup(args[0]); c != nil {
			return c.run(e, []string{"-h"})
		}
		if t := lookupTopic(args[0]); t != nil {
			fmt.Fprintf(e.stdout, "%s\n\n%s\n", upperFirst(t.short)+".", strings.TrimSpace(t.text))
			return exitOK
		}
		fmt.Fprintf(e.stderr, "dlock help: unknown command or topic %q\n", args[0])
		return exitUsage
	}
	return usageError(e, "help", "too many arguments")
}
