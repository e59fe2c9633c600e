package main

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// need is a feature of the lock store that a flag or a command asks for.
// dlock asks the driver (driver.Supports) before it runs anything, and
// refuses a flag the store cannot honour rather than ignore it:
//
//	run --limit                      driver.FeatureSemaphore
//	run --shared, run --exclusive    driver.FeatureRWLock
//	run --hold-at-least (above 0)    driver.FeatureLapse
//	status, ls, top, unlock --force  driver.FeatureInspect
//	leader                           driver.FeatureInspect
//	leader --watch                   driver.FeatureInspect and driver.FeatureWatch
type need struct {
	flag    string // as the user wrote it ("--limit"), or the command ("status")
	feature driver.Feature
}

// inspection is what status, ls, top, unlock and leader need.
func inspection(command string) need { return need{command, driver.FeatureInspect} }

// features names each feature in dlock's messages, and the interface that offers it.// package dlock that offers it.
var features = map[driver.Feature]struct{ noun, iface string }{
	driver.FeatureSemaphore: {"semaphores", "dlock.Semaphore"},
	driver.FeatureRWLock:    {"read-write locks", "dlock.RWLocker"},
	driver.FeatureWatch:     {"watching a key", "driver.Watcher"},
	driver.FeatureLapse:     {"UnlockAfter", "driver.Lapser"},
	driver.FeatureInspect:   {"inspection", "dlock.Inspector"},
}

// unmet returns the line that refuses the first of needs be cannot
// honour, with the reason its driver gives, or "" when be honours them
// all.
func unmet(be backend, needs []need) string {
	for _, n := range needs {
		if driver.Supports(be, n.feature) == nil {
			continue
		}
		f := features[n.feature]
		reason := "its driver does not implement " + f.iface
		var ue *driver.UnsupportedError
		if d, ok := be.(driver.Declarer); ok && errors.As(d.Unsupported(n.feature), &ue) {
			reason = ue.Reason
		}
		return fmt.Sprintf("%s: %s does not offer %s: %s", n.flag, be.name(), f.noun, reason)
	}
	return ""
}
