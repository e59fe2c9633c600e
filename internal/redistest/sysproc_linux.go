package redistest

import "syscall"

// sysProcAttr kills the server when the test binary dies, so that a crashed
// or interrupted test run leaves no redis-server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
