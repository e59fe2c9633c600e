// Package gocronlock plugs dlock into gocron v2's scheduler
// (github.com/go-co-op/gocron/v2, whose package is named gocron):
//
//	jobLocker, err := gocronlock.NewLocker(locker, 30*time.Second)
//	...
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(jobLocker))
//
// runs each job at most once per tick across every scheduler that shares
// the lock store, holding the job's lock for at least 30s from its start
// (so that a scheduler whose clock lags by less than that finds the tick
// taken), and for as long as the job runs; or
//
//	el := gocronlock.NewElector(e, hostname) // e is an *election.Election
//	defer el.Close()
//	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
//
// runs jobs only on the scheduler whose process leads the election; when
// the leader goes, another is elected and its scheduler takes over.
//
// It is a module of its own (github.com/dlock-go/dlock/gocronlock), so that
// dlock's users who do not use gocron never build it.
package gocronlock
