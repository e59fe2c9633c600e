package main

import "syscall"

// childAttr makes the kernel send CMD SIGTERM when dlock dies, so that a
// CMD does not run on unprotected after kill -9 of dlock.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
