package postgreslock

import "time"

// SetBeforeWatchStart has Watch call f once its arguments are checked,
// just before it starts its goroutine.
func SetBeforeWatchStart(l *Locker, f func()) { l.beforeWatchStart = f }

// SetListenPing sets how long l's LISTEN session may stay silent before
// it is pinged, and how long the ping may take. Call it before any use.
func SetListenPing(l *Locker, d time.Duration) { l.ln.ping = d }

// ListenSessions returns how many LISTEN sessions l has set up so far.
func ListenSessions(l *Locker) int { return int(l.ln.sessions.Load()) }

// AttemptGrace is how long an attempt may run past a wait's limit.
const AttemptGrace = attemptGrace

// RenewSQL is the renewal statement of the tables named table.
func RenewSQL(table string) string { return newStatements(table).renew }

// AcquireSQL and ReleaseSQL are the acquisition and release statements of
// the tables named table.
func AcquireSQL(table string) string { return newStatements(table).acquire }
func ReleaseSQL(table string) string { return newStatements(table).release }

// SetListenIdle sets how long l's LISTEN session listens with nobody
// waiting or watching before it stops. Call it before any use.
func SetListenIdle(l *Locker, d time.Duration) { l.ln.idle = d }

// SetBeforeQuiet has l's LISTEN session call f once it has decided to
// stop listening, before it sends UNLISTEN. Call it before any use.
func SetBeforeQuiet(l *Locker, f func()) { l.ln.beforeQuiet = f }

// Listening reports whether l's LISTEN session listens.
func Listening(l *Locker) bool { return l.ln.isUp() }
