// Command dlock runs a command while holding a distributed lock, kept in
// Redis or etcd, and shows who holds what. What flock(1) is on one machine,
// dlock is across machines: cron jobs, deploy scripts and migrations that
// must not run twice.
//
// Usage:
//
//	dlock run [flags] KEY -- CMD [ARGS...]
//	dlock status [--json] KEY
//	dlock ls [--json] [PATTERN]
//	dlock unlock --force KEY
//	dlock demo
//	dlock version
//	dlock help [COMMAND|TOPIC]
//
// `dlock help` is the reference: every command's flags, the exit codes,
// the Redis URL forms and the etcd endpoints. README.md beside this file
// holds the same text.
package main
