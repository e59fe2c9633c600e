package redislock

// renewed reports the outcome of one renewal to the Locker's observer, if
// it has one: renewed (err nil), refused (the token is gone: the loss
// follows) or failed with the batch's or the lock's error.
func (l *Locker) renewed(lk *hold, err error) {
	if l.tables.Locks.Observed() {
		l.tables.Locks.Renewed(lk, err)
	}
}
