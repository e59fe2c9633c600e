package postgreslock

// SetBeforeWatchStart has Watch call f once its arguments are checked,
// just before it starts its goroutine.
func SetBeforeWatchStart(l *Locker, f func()) { l.beforeWatchStart = f }
